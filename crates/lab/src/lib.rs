//! latlab-lab: everything between the command line and the engines.
//!
//! Every command of the `latlab` binary is a function here that takes checked options and
//! returns a report whose files are already written: [`echo::run`], [`gen::run`],
//! [`serve::run`], [`emu::run`], [`demo::run`] and the studies ([`gamestudy::run`],
//! [`emustudy::run`]). Live counters and progress go through [`command::LiveView`] and
//! [`demo::ProgressSink`], which the command line implements; the stop flag is a
//! [`command::Stop`] the caller raises.
//!
//! Topologies of network namespaces joined by veth pairs (or loopback), measurements from
//! options to summaries, results folders written whole or not at all, tables and plots drawn
//! from the results data, and the demo.
//!
//! Results are data first: a run's `summary.json`, `.hlog` and `ccdf.csv` are written before
//! anything is drawn, and [`table::render`] and [`plot::ccdf_svg`] take only that data, so any
//! report can be made again from a results folder.
//!
//! ```
//! use latlab_lab::units::{format_us, parse_duration};
//! assert_eq!(parse_duration("250ms").unwrap().as_millis(), 250);
//! assert_eq!(format_us(12_345.0), "12.35 µs");
//! ```
#![forbid(unsafe_code)]

pub mod command;
pub mod demo;
pub mod echo;
pub mod emu;
pub mod emuconfig;
pub mod emureport;
pub mod emustudy;
pub mod gamereport;
pub mod gamestudy;
pub mod gen;
pub mod measure;
pub mod plot;
pub mod results;
pub mod serve;
pub mod table;
pub mod topology;
pub mod units;
