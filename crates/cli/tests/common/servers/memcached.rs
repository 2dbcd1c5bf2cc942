//! memcached: to be written.
