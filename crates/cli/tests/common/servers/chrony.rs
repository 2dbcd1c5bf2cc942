//! chrony: to be written.
