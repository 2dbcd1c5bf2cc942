//! latlab-forwarding: latlab's forwarding benchmarks, on top of the studies' skeleton in
//! `latlab-study` and the kit in `latlab-lab`: the RFC 2544 benchmark of one DUT (and
//! MLRsearch beside its binary search), `latlab rfc2544` ([`rfc2544`]), and `latlab study
//! forwarding` ([`forwarding`]), every forwarder the lab builds measured that way; and `latlab
//! fwd` itself, the L2 forwarder with its cycle accounting ([`fwd`]).
//!
//! Both are studies of `latlab_study`'s registry ([`latlab_study::Study`]); [`STUDIES`] holds
//! their two lines, which the command line adds to [`latlab_study::STUDIES`] for `latlab
//! report`. `latlab check` on an `rfc2544` folder is [`check`].

#![forbid(unsafe_code)]

use latlab_study::check::{CheckError, CheckOptions};
use latlab_study::registry::StudyEntry;

pub mod forwarding;
pub mod fwd;
pub mod rfc2544;

/// The studies of this crate, one line each, as [`latlab_study::STUDIES`] lists the others.
pub static STUDIES: [StudyEntry; 2] = [
    StudyEntry::of::<forwarding::ForwardingStudy>(),
    StudyEntry::of::<rfc2544::Rfc2544Study>(),
];

/// `latlab check DIR`: [`latlab_study::check::run`], which also reads an `rfc2544` folder's
/// frame sizes ([`rfc2544::gates::check_folder`]).
pub fn check(
    options: &CheckOptions,
) -> Result<Vec<latlab_lab::gate::AssertionVerdict>, CheckError> {
    latlab_study::check::run(options, &[rfc2544::gates::check_folder])
}
