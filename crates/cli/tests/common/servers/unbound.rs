//! unbound: to be written.
