//! The read-back check of `scripts/bench-multiprocess`: reads the `id` column of every visible
//! Parquet file under a local lake (names starting with `.` or `_`, such as hidden in-progress
//! files and `_filesink/`, are not output) and prints one line: files, rows, distinct ids,
//! smallest and largest id. Exits 1 unless the ids are exactly `0..EXPECTED`, each once.
//!
//! ```text
//! cargo run --release --example lake_check -- LAKE_DIR EXPECTED
//! ```

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, Int64Array};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn visible_parquet(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name.starts_with('_') {
            continue;
        }
        if e.file_type()?.is_dir() {
            visible_parquet(&e.path(), out)?;
        } else if name.ends_with(".parquet") {
            out.push(e.path());
        }
    }
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, expected] = args.as_slice() else {
        return Err("usage: lake_check LAKE_DIR EXPECTED".into());
    };
    let expected: i64 = expected.parse()?;
    let mut files = Vec::new();
    visible_parquet(Path::new(dir), &mut files)?;
    let mut ids = Vec::new();
    for f in &files {
        let b = ParquetRecordBatchReaderBuilder::try_new(File::open(f)?)?;
        let mask = ProjectionMask::columns(b.parquet_schema(), ["id"]);
        for batch in b.with_projection(mask).build()? {
            let batch = batch?;
            let col = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or("column `id` is not Int64")?;
            ids.extend(col.iter().flatten());
        }
    }
    let rows = ids.len();
    ids.sort_unstable();
    ids.dedup();
    let ok = rows as i64 == expected
        && ids.len() as i64 == expected
        && ids.first().is_none_or(|&i| i == 0)
        && ids.last().is_none_or(|&i| i == expected - 1);
    println!(
        "files {} rows {rows} distinct {} min {} max {} expected {expected}: {}",
        files.len(),
        ids.len(),
        ids.first().map_or("-".into(), i64::to_string),
        ids.last().map_or("-".into(), i64::to_string),
        if ok { "exactly once" } else { "MISMATCH" }
    );
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
