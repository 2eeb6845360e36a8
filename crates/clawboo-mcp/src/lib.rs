pub mod attach;
pub mod signing;
