//! The generated rows and payloads of the measurements: deterministic, from a seed.

use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;

/// Longest generated payload value; smaller files get shorter values (a file has about 32
/// rows), so that calibration can hit the asked size within a few percent.
pub(super) const PAYLOAD_VALUE_BYTES_MAX: usize = 1000;

pub(super) fn payload_value_len(file_size: u64) -> usize {
    ((file_size / 32) as usize).clamp(16, PAYLOAD_VALUE_BYTES_MAX)
}

/// One batch per partition, each a part file's worth of payload rows.
pub(super) fn payload_batches(rows: usize, value_len: usize, partitions: u64) -> Vec<RecordBatch> {
    if partitions == 1 {
        return vec![payload_batch(rows, value_len, None)];
    }
    (0..partitions)
        .map(|p| payload_batch(rows, value_len, Some(&p.to_string())))
        .collect()
}

/// `rows` rows of distinct, incompressible `value_len`-character values, and a `part` column
/// when `partition` is given.
pub(super) fn payload_batch(rows: usize, value_len: usize, partition: Option<&str>) -> RecordBatch {
    let mut rng = 0x5eed_u64 ^ rows as u64;
    let values: Vec<String> = (0..rows)
        .map(|_| random_text(&mut rng, value_len))
        .collect();
    let mut fields = vec![Field::new("payload", DataType::Utf8, false)];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(StringArray::from(values))];
    if let Some(p) = partition {
        fields.push(Field::new("part", DataType::Utf8, false));
        columns.push(Arc::new(StringArray::from(vec![p; rows])));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("columns match the schema")
}

/// The bytes one floor file holds.
pub(super) fn payload_bytes(len: usize) -> Vec<u8> {
    let mut rng = 0x5eed_u64;
    random_text(&mut rng, len).into_bytes()
}

pub(super) fn random_text(rng: &mut u64, len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..len)
        .map(|_| ALPHABET[(splitmix64(rng) % ALPHABET.len() as u64) as usize] as char)
        .collect()
}

pub(super) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
