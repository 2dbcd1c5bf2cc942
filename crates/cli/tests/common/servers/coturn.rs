//! coturn: to be written.
