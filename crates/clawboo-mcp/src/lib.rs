pub mod attach;
pub mod probe;
pub mod signing;
