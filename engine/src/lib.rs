pub mod error;
pub mod records;
