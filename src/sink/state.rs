//! The checkpoint's data as the sink hands it out. The types live in [`crate::protocol`]; this
//! module names them where a writer produces them.

pub use crate::protocol::names::{
    looks_in_progress, parse_hidden_name, split_rel, validate_rel_path, PartName,
};
pub use crate::protocol::state::{
    upload_leftover_id, CarriedFile, Committable, PendingHandle, PreparedCheckpoint, ResumableFile,
    UploadedPart, WriterState,
};
pub use crate::protocol::FORMAT_VERSION;
