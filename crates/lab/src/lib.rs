//! latlab-lab: everything between the command line and the engines.
//!
//! Every command of the `latlab` binary is a function here that takes checked options and
//! returns a report whose files are already written: [`echo::run`], [`gen::run`],
//! [`serve::run`], [`emu::run`], [`fwd::run`], [`rfc2544::run`], [`demo::run`],
//! [`stream::send::run`] and [`stream::recv::run`] (one thin stream over a real transport), the
//! studies ([`study::game_server::run`],
//! [`study::emulator::run`]) and [`report::run`]. Live counters and progress go through [`command::LiveView`] and
//! [`demo::ProgressSink`], which the command line implements; the stop flag is a
//! [`command::Stop`] the caller raises.
//!
//! Topologies of network namespaces joined by veth pairs (or loopback), measurements from
//! options to summaries, results folders written whole or not at all, tables and plots drawn
//! from the results data, the demo, and the studies ([`study`]: one error type, one progress
//! trait and one points folder for all of them, each study in a module folder of its own).
//! What a run makes outside its results (namespaces, partial results) is marked with an owner
//! lock that dies with the run, and [`clean`] removes what runs that ended left behind.
//!
//! Results are data first: a run's `summary.json`, `.hlog` and `ccdf.csv` are written before
//! anything is drawn, and [`table::render`] and [`plot::ccdf_svg`] take only that data, so any
//! report can be made again from a results folder; [`report::redraw`] does it for any folder a
//! `gen`, `demo` or study wrote.
//!
//! ```
//! use latlab_lab::units::{format_us, parse_duration};
//! assert_eq!(parse_duration("250ms").unwrap().as_millis(), 250);
//! assert_eq!(format_us(12_345.0), "12.35 µs");
//! ```
#![forbid(unsafe_code)]

pub mod clean;
pub mod command;
pub mod demo;
pub mod echo;
pub mod emu;
pub mod error;
pub mod fwd;
pub mod gen;
pub mod measure;
pub mod merge;
pub mod plot;
pub mod report;
pub mod results;
pub mod rfc2544;
pub mod serve;
pub mod stream;
pub mod study;
pub mod table;
pub mod topology;
pub mod trace;
pub mod units;
