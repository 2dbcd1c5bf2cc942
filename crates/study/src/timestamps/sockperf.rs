//! sockperf as the outside view of the timestamp study: `sockperf ping-pong` in the client,
//! `sockperf server` in the server, through the same emulated path, read back from its full
//! log (every message's send and receive time).

use std::path::Path;
use std::process::{Command, Stdio};

use super::ProbeStamps;

/// The port sockperf's server listens on.
const PORT: u16 = 11111;

/// Whether sockperf can be run: `Err` says why not. Installs it from Debian's packages when
/// it is missing and `apt-get` can.
pub(super) fn available() -> Result<(), String> {
    latlab_lab::command::debian_tool("sockperf", &["--version"], &["sockperf"])
}

/// Runs `sockperf ping-pong` from namespace `client` (on CPU `client_cpu`) to a `sockperf
/// server` it starts in namespace `server` at `server_addr` (on CPU `server_cpu`) for
/// `seconds` at `rate_pps` messages per second, writing its full log to `log`; returns every
/// message's stamps, or why it could not.
pub(super) fn ping_pong(
    (client, client_cpu): (&str, usize),
    (server, server_cpu, server_addr): (&str, usize, &str),
    seconds: u64,
    rate_pps: f64,
    log: &Path,
) -> Result<Vec<ProbeStamps>, String> {
    let netns = |ns: &str, cpu: usize| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, "taskset", "-c", &cpu.to_string()]);
        c.arg("sockperf");
        c
    };
    let mut srv = netns(server, server_cpu)
        .args(["server", "-i", server_addr, "-p", &PORT.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("sockperf server did not start: {e}"))?;
    // Give the server the time to bind before the client's first message.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = netns(client, client_cpu)
        .args(["ping-pong", "-i", server_addr, "-p", &PORT.to_string()])
        .args([
            "-t",
            &seconds.to_string(),
            &format!("--mps={}", rate_pps as u64),
        ])
        .args(["-m", "64", "--full-rtt", "--full-log"])
        .arg(log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    // The server runs until it is stopped: by its id, which this function started.
    let _ = srv.kill();
    let _ = srv.wait();
    let out = out.map_err(|e| format!("sockperf ping-pong did not run: {e}"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        let line = why.lines().last().unwrap_or("no message");
        return Err(format!("sockperf ping-pong failed: {line}"));
    }
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let _ = std::fs::remove_file(log);
    Ok(parse_full_log(&text))
}

/// The messages of a sockperf `--full-log`: after its `packet, txTime(sec), rxTime(sec),
/// rtt(usec)` header, one line per message until the closing rule. Times are seconds with
/// nine decimals; lines that do not read are left out.
pub(super) fn parse_full_log(text: &str) -> Vec<ProbeStamps> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with("packet,"));
    lines.next();
    lines
        .take_while(|l| !l.starts_with("---"))
        .filter_map(|l| {
            let mut fields = l.split(',').map(str::trim);
            let _packet = fields.next()?;
            let tx = seconds_ns(fields.next()?)?;
            let rx = seconds_ns(fields.next()?)?;
            (rx >= tx).then_some(ProbeStamps {
                xdp_rx: None,
                user_tx: tx,
                user_rx: rx,
                kernel_tx: None,
                kernel_rx: None,
            })
        })
        .collect()
}

/// `2.949144136` (seconds) as nanoseconds, without going through a float.
fn seconds_ns(text: &str) -> Option<u64> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().ok()? * 10u64.pow(9 - frac.len() as u32)
    };
    whole.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_log_gives_each_message_its_send_and_receive_time() {
        let log = "sockperf: ---> <MIN> observation =   13.625\n------------------------------\npacket, txTime(sec), rxTime(sec), rtt(usec)\n0, 2.949144136, 2.949161408, 17.272\n1, 3.5, 3.500020000, 20.000\n2, garbage, 3.6, 1\n3, 4.000000010, 4.000000000, -0.01\n------------------------------\n9, 5.0, 5.1, 1\n";
        let got = parse_full_log(log);
        assert_eq!(
            got.len(),
            2,
            "bad and backwards lines are left out: {got:?}"
        );
        assert_eq!(got[0].user_tx, 2_949_144_136);
        assert_eq!(got[0].user_rx - got[0].user_tx, 17_272);
        assert_eq!(got[1].user_rx - got[1].user_tx, 20_000);
        assert!(parse_full_log("no header at all\n1, 2, 3, 4\n").is_empty());
        assert_eq!(seconds_ns("1.0000000001"), None, "more than nanoseconds");
    }
}
