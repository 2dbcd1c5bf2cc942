//! quake3: to be written.
