//! The values the flags take, as clap lists them (`-h`, `--help`, and `tests/readme.rs`, which
//! holds the guide's command summary, `docs/commands.md`, against them), built from the constants the lab's
//! parsers use: a name is written once, where it is parsed.

use clap::builder::{PossibleValue, TypedValueParser};
use latlab_forwarding::rfc2544::{Dut, FwdPoll};
use latlab_lab::command::{parse_server_io, Io, Pattern, TrafficModel, SERVER_IOS};
use latlab_lab::cores::PollChoice;
use latlab_lab::measure::{ClockChoice, ThreadChoice};
use latlab_stream::transport::{TRANSPORTS_HELP, UNAVAILABLE};
use latlab_study::transports::LossKind;

/// A value parser that lists `values` as its possible values. They are shown (and offered to
/// shells), not checked: `parser` alone decides, and its error names what it takes.
#[derive(Clone)]
pub(crate) struct Listed<P> {
    parser: P,
    values: Vec<PossibleValue>,
}

impl<P: TypedValueParser> TypedValueParser for Listed<P> {
    type Value = P::Value;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        self.parser.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.values.iter().cloned()))
    }
}

fn listed<P: TypedValueParser>(
    parser: P,
    values: impl IntoIterator<Item = impl Into<PossibleValue>>,
) -> Listed<P> {
    Listed {
        parser,
        values: values.into_iter().map(Into::into).collect(),
    }
}

/// A `--io` flag that takes the I/O paths of `among` (each with its help, "" for none) and
/// refuses the others, naming those it takes.
fn io_among(among: &[(Io, &'static str)]) -> impl TypedValueParser<Value = Io> {
    let ios: Vec<Io> = among.iter().map(|&(io, _)| io).collect();
    let values = among.iter().map(|&(io, help)| {
        let value = PossibleValue::new(io.name());
        if help.is_empty() {
            value
        } else {
            value.help(help)
        }
    });
    listed(
        move |text: &str| Io::parse_among(text, &ios, "I/O"),
        values.collect::<Vec<_>>(),
    )
}

/// `--io` of echo and gen: socket or xdp.
pub(crate) fn socket_io() -> impl TypedValueParser<Value = Io> {
    io_among(&[
        (
            Io::Socket,
            "Kernel UDP sockets with recvmmsg/sendmmsg batches",
        ),
        (
            Io::Xdp,
            "AF_XDP: frames taken before the kernel's stack, IPv4/UDP handled in user space",
        ),
    ])
}

/// `--io` of emu and fwd, `--source` of rfc2544 and the forwarding study: packet or xdp.
pub(crate) fn frame_io() -> impl TypedValueParser<Value = Io> {
    io_among(&[(Io::Packet, ""), (Io::Xdp, "")])
}

/// `--io` of fwd: packet, xdp or xdp-redirect.
pub(crate) fn fwd_io() -> impl TypedValueParser<Value = Io> {
    io_among(&[(Io::Packet, ""), (Io::Xdp, ""), (Io::XdpRedirect, "")])
}

/// `--io` of serve and the game-server study: the I/O paths the game server runs on.
pub(crate) fn server_io() -> impl TypedValueParser<Value = Io> {
    listed(parse_server_io, SERVER_IOS.map(Io::name))
}

/// `--poll` of echo, gen and serve: auto (the core plan), busy or block.
pub(crate) fn poll() -> impl TypedValueParser<Value = PollChoice> {
    listed(
        |text: &str| text.parse::<PollChoice>(),
        PollChoice::ALL.map(PollChoice::name),
    )
}

/// `--pattern` of gen.
pub(crate) fn pattern() -> impl TypedValueParser<Value = Pattern> {
    listed(
        |text: &str| text.parse::<Pattern>(),
        Pattern::ALL.map(Pattern::name),
    )
}

/// `--protocol` of gen: a name of [`latlab_lab::protocols::NAMES`] (an unknown one refused in
/// one line that lists them).
pub(crate) fn protocol() -> impl TypedValueParser<Value = String> {
    use latlab_lab::protocols::NAMES;
    listed(
        |text: &str| {
            if NAMES.contains(&text) {
                Ok(text.to_string())
            } else {
                Err(format!("{text:?} is not a protocol: {}", NAMES.join(", ")))
            }
        },
        NAMES,
    )
}

/// `--threads` of gen.
pub(crate) fn threads() -> impl TypedValueParser<Value = ThreadChoice> {
    listed(
        |text: &str| text.parse::<ThreadChoice>(),
        ThreadChoice::ALL.map(ThreadChoice::name),
    )
}

/// `--clock` of gen.
pub(crate) fn clock() -> impl TypedValueParser<Value = ClockChoice> {
    listed(ClockChoice::parse, ClockChoice::ALL.map(ClockChoice::name))
}

/// `--poll` of fwd and `--fwd-poll` of rfc2544: busy, block or rate:N.
pub(crate) fn fwd_poll() -> impl TypedValueParser<Value = FwdPoll> {
    listed(|text: &str| text.parse::<FwdPoll>(), FwdPoll::FORMS)
}

/// What `--polls` of the forwarding study takes besides [`FwdPoll::FORMS`]: no poll series.
pub(crate) const NO_POLLS: &str = "none";

/// `--polls` of the forwarding study: a form of [`fwd_poll`], or [`NO_POLLS`].
pub(crate) fn fwd_polls() -> impl TypedValueParser<Value = String> {
    let parse = |text: &str| -> Result<String, String> {
        if text != NO_POLLS {
            text.parse::<FwdPoll>()?;
        }
        Ok(text.to_string())
    };
    listed(parse, FwdPoll::FORMS.into_iter().chain([NO_POLLS]))
}

fn dut_value(dut: Dut) -> PossibleValue {
    PossibleValue::new(dut.name()).help(dut.help())
}

/// `--dut` of rfc2544: every DUT the lab builds, and external.
pub(crate) fn dut() -> impl TypedValueParser<Value = Dut> {
    let every = Dut::ALL.into_iter().chain([Dut::EXTERNAL]);
    listed(|text: &str| text.parse::<Dut>(), every.map(dut_value))
}

/// `--duts` of the forwarding study: the DUTs the lab builds (not external).
pub(crate) fn built_dut() -> impl TypedValueParser<Value = Dut> {
    let parse = |text: &str| match text.parse::<Dut>()? {
        Dut::EXTERNAL => Err(format!(
            "{text}: the study measures the DUTs it builds; measure yours with latlab rfc2544 \
             --dut {text}"
        )),
        dut => Ok(dut),
    };
    listed(parse, Dut::ALL.map(dut_value))
}

/// `--loss-models` of the transport study.
pub(crate) fn loss_kind() -> impl TypedValueParser<Value = LossKind> {
    listed(
        |text: &str| text.parse::<LossKind>(),
        LossKind::ALL.map(LossKind::name),
    )
}

/// `--model` of gen, stream send and the game-server study: a Table 1 model by name, or one of
/// the other forms.
pub(crate) fn model() -> impl TypedValueParser<Value = TrafficModel> {
    let forms = TrafficModel::NAMES.into_iter().chain(TrafficModel::FORMS);
    listed(|text: &str| text.parse::<TrafficModel>(), forms)
}

/// The transports `latlab stream` drives, by name: `udp`, `tcp`, … (each form of
/// [`TRANSPORTS_HELP`] up to its options).
pub(crate) fn transport_names() -> Vec<&'static str> {
    TRANSPORTS_HELP
        .split(" | ")
        .map(|form| form.split(['[', ':']).next().unwrap_or(form).trim())
        .collect()
}

/// The transports named but refused on this machine or build (`udt`, `sctp`), as a list.
fn unavailable() -> String {
    let names: Vec<&str> = UNAVAILABLE.iter().map(|&(name, _)| name).collect();
    names.join(" and ")
}

/// `--transport`'s help on stream send and stream recv.
pub(crate) fn transport_help() -> String {
    format!(
        "{TRANSPORTS_HELP}. The receiver must run the same as the senders. ({} are refused, \
         with the reason.)",
        unavailable()
    )
}

/// `--transports`' help on the transport study.
pub(crate) fn transports_study_help() -> String {
    format!(
        "Transports, comma separated, as `latlab stream send --transport` spells them \
         ({TRANSPORTS_HELP}), with `+` between a transport's options here: tcp:cc=reno+thin, \
         latlab:thin:min-rto=120ms+rdb=600 [default: udp, tcp (cubic), tcp (reno, thin), \
         modified tcp (reno, thin, rto_min=10ms), enet, kcp (fast), quic, latlab's tcp-like, \
         thin, rack with RDB and game]"
    )
}
