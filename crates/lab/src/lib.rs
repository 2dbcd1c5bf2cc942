//! latlab-lab: the kit the commands and the studies stand on.
//!
//! Every command of the `latlab` binary that is not a study is a function here that takes
//! checked options and returns a report whose files are already written: [`echo::run`],
//! [`gen::run`], [`serve::run`], [`merge`], [`trace`] and [`clean`]. `latlab fwd` lives in
//! `latlab-forwarding`, beside RFC 2544. The emulator's commands (`emu`, `run`, `shell`) live in `latlab-emu`, the thin-stream commands
//! in `latlab-stream`, the studies, `rfc2544`, the demo and `report` in `latlab-study`, all on
//! top of this crate. Live counters, progress and notes of commands, runs and studies alike go
//! through one trait, [`progress::View`], which the command line implements once; the stop
//! flag is a [`command::Stop`] the caller raises.
//!
//! Topologies of network namespaces joined by veth pairs (or loopback) ([`topology`]),
//! measurements from options to summaries ([`measure`]) with their lost probes by cause
//! ([`losses`]), results folders written whole or not
//! at all ([`results`]), tables and plots drawn from the results data ([`table`], [`plot`]),
//! and what runs between a lab's client and server ([`middle`]). What a run makes outside
//! its results (namespaces, partial results) is marked with an owner lock that dies with the
//! run, and [`clean`] removes what runs that ended left behind.
//!
//! Results are data first: a run's `summary.json`, `.hlog` and `ccdf.csv` are written before
//! anything is drawn, and [`table::render`] and [`plot::ccdf_svg`] take only that data, so any
//! report can be made again from a results folder (`latlab report`).
//!
//! ```
//! use latlab_lab::units::{format_us, parse_duration};
//! assert_eq!(parse_duration("250ms").unwrap().as_millis(), 250);
//! assert_eq!(format_us(12_345.0), "12.35 µs");
//! ```
#![forbid(unsafe_code)]

pub mod clean;
pub mod command;
pub mod cores;
pub mod echo;
pub mod error;
pub mod gate;
pub mod gen;
pub mod losses;
pub mod measure;
pub mod merge;
pub mod middle;
/// The plots, drawn by their own crate (`latlab-plot`), reached here as they always were.
pub use latlab_plot as plot;
pub mod points;
pub mod progress;
pub mod protocols;
pub mod results;
pub mod serve;
pub mod table;
pub mod topology;
pub mod trace;
pub mod units;
