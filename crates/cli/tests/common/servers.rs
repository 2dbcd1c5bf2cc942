//! Real servers nobody here wrote, each started by a test inside a namespace it made, from
//! Debian's packages, with its configuration in a temporary folder; each is stopped (by its
//! process id) when the value that holds it drops. A missing binary is a skip outside CI and a
//! failure under `CI=true` (`latlab_io::precondition`).

pub(crate) mod chrony;
pub(crate) mod coturn;
pub(crate) mod memcached;
pub(crate) mod quake3;
pub(crate) mod unbound;
