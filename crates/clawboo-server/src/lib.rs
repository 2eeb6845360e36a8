//! Clawboo HTTP server (mounted by `clawboo serve`).
