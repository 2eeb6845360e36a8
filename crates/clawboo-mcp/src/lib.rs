pub mod envelope;
