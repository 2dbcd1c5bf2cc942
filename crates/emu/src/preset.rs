//! Presets: named sets of knobs for the conditions people test against, each with its source.
//!
//! A preset is two specs in the words of `--a-to-b`: what goes up (A→B: in `latlab run` what
//! CMD sends, with `--attach` what the container sends) and what comes down (B→A). It is the
//! first layer of a link: `--preset NAME` sets both directions before `--config`, the flags and
//! the per-direction specs, which override it key by key; `preset=NAME` inside a spec (a
//! direction's, a TOML table's, a `--flow` rule's, an API body's) sets that direction's keys of
//! the preset where it stands, and the keys after it override them.
//!
//! Browsers throttle per HTTP request, not per packet: their "latency" is a minimum added to
//! each request's round trip. On a link it becomes half of it each way, and their throughputs
//! become each direction's `rate`.

/// One preset.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    /// Its name, as `--preset` and `preset=` take it.
    pub name: &'static str,
    /// What it stands for, in a few words.
    pub about: &'static str,
    /// Where its values come from.
    pub source: &'static str,
    /// A→B's keys (up).
    pub up: &'static str,
    /// B→A's keys (down).
    pub down: &'static str,
    /// Events both ways, as a schedule file writes them (`10s outage 1s`, one per line;
    /// empty for none): the lag spikes and disconnections a scenario holds.
    pub events: &'static str,
}

const CHROME: &str = "Chrome DevTools' throttling presets (devtools-frontend, \
                      front_end/core/sdk/NetworkManager.ts, 2024)";
const FIREFOX: &str = "Firefox DevTools' throttling profiles (devtools/client/shared/\
                       components/throttling/profiles.js; 1 Kbps = 1,024 bit/s)";

const UNITY: &str = "Unity Multiplayer Tools' network simulator presets \
                     (NetworkSimulator/Runtime/NetworkSimulatorPresets.cs, \
                     com.unity.multiplayer.tools)";
const UNREAL: &str = "Unreal Engine's network emulation profiles (Engine/Config/BaseEngine.ini, \
                      [PacketSimulationProfile.Average] and [PacketSimulationProfile.Bad]: \
                      PktLagMin/PktLagMax and PktLoss out, PktIncomingLagMin/Max and \
                      PktIncomingLoss in; a lag uniform between min and max)";
const UNITY_LAG_SPIKES: &str = "10s outage 1s\n30s outage 1s\n50s outage 1s\n\
                                70s outage 1s\n90s outage 1s\n110s outage 1s\n\
                                130s outage 1s\n150s outage 1s\n170s outage 1s\n\
                                190s outage 1s\n210s outage 1s\n230s outage 1s\n\
                                250s outage 1s\n270s outage 1s\n290s outage 1s";

/// One of Unity's presets: `delay` ms ± `jitter` ms (uniform) and `loss` % each way.
macro_rules! unity {
    ($name:literal, $label:literal, $delay:literal, $jitter:literal, $loss:literal) => {
        Preset {
            name: $name,
            about: concat!(
                "Unity's \"",
                $label,
                "\": ",
                $delay,
                " ms ± ",
                $jitter,
                " ms, ",
                $loss,
                "% loss, each way"
            ),
            source: UNITY,
            up: unity!(@spec $delay, $jitter, $loss),
            down: unity!(@spec $delay, $jitter, $loss),
            events: "",
        }
    };
    // The spec of one way.
    (@spec $delay:literal, $jitter:literal, $loss:literal) => {
        concat!("delay=", $delay, "ms jitter=", $jitter, "ms loss=", $loss, "%")
    };
}

/// Every preset, in the order `--preset list` prints them.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "chrome-3g",
        about: "Chrome's \"3G\" (\"Slow 3G\" before 2024): 400 kbit/s, 2,000 ms round trip",
        source: CHROME,
        up: "delay=1000ms rate=400kbit",
        down: "delay=1000ms rate=400kbit",
        events: "",
    },
    Preset {
        name: "chrome-slow-4g",
        about: "Chrome's \"Slow 4G\" (\"Fast 3G\" before 2024): 1.44 Mbit/s down, 675 kbit/s up, \
                562.5 ms round trip",
        source: CHROME,
        up: "delay=281250us rate=675kbit",
        down: "delay=281250us rate=1440kbit",
        events: "",
    },
    Preset {
        name: "chrome-fast-4g",
        about: "Chrome's \"Fast 4G\": 8.1 Mbit/s down, 1.35 Mbit/s up, 165 ms round trip",
        source: CHROME,
        up: "delay=82500us rate=1350kbit",
        down: "delay=82500us rate=8100kbit",
        events: "",
    },
    Preset {
        name: "firefox-gprs",
        about: "Firefox's \"GPRS\": 50 Kbps down, 20 Kbps up, 500 ms",
        source: FIREFOX,
        up: "delay=250ms rate=20480bit",
        down: "delay=250ms rate=51200bit",
        events: "",
    },
    Preset {
        name: "firefox-2g",
        about: "Firefox's \"Regular 2G\": 250 Kbps down, 50 Kbps up, 300 ms",
        source: FIREFOX,
        up: "delay=150ms rate=51200bit",
        down: "delay=150ms rate=256000bit",
        events: "",
    },
    Preset {
        name: "firefox-good-2g",
        about: "Firefox's \"Good 2G\": 450 Kbps down, 150 Kbps up, 150 ms",
        source: FIREFOX,
        up: "delay=75ms rate=153600bit",
        down: "delay=75ms rate=460800bit",
        events: "",
    },
    Preset {
        name: "firefox-3g",
        about: "Firefox's \"Regular 3G\": 750 Kbps down, 250 Kbps up, 100 ms",
        source: FIREFOX,
        up: "delay=50ms rate=256000bit",
        down: "delay=50ms rate=768000bit",
        events: "",
    },
    Preset {
        name: "firefox-good-3g",
        about: "Firefox's \"Good 3G\": 1.5 Mbps down, 750 Kbps up, 40 ms",
        source: FIREFOX,
        up: "delay=20ms rate=768000bit",
        down: "delay=20ms rate=1572864bit",
        events: "",
    },
    Preset {
        name: "firefox-lte",
        about: "Firefox's \"Regular 4G / LTE\": 4 Mbps down, 3 Mbps up, 20 ms",
        source: FIREFOX,
        up: "delay=10ms rate=3145728bit",
        down: "delay=10ms rate=4194304bit",
        events: "",
    },
    Preset {
        name: "firefox-dsl",
        about: "Firefox's \"DSL\": 2 Mbps down, 1 Mbps up, 5 ms",
        source: FIREFOX,
        up: "delay=2500us rate=1048576bit",
        down: "delay=2500us rate=2097152bit",
        events: "",
    },
    Preset {
        name: "firefox-wifi",
        about: "Firefox's \"Wi-Fi\": 30 Mbps down, 15 Mbps up, 2 ms",
        source: FIREFOX,
        up: "delay=1ms rate=15728640bit",
        down: "delay=1ms rate=31457280bit",
        events: "",
    },
    Preset {
        name: "cable",
        about: "a DOCSIS 3.0 cable tier: 100 Mbit/s down, 10 Mbit/s up, 20 ms round trip, \
                1 ms jitter",
        source: "latlab's choice, a typical consumer cable tier",
        up: "delay=10ms jitter=1ms rate=10mbit",
        down: "delay=10ms jitter=1ms rate=100mbit",
        events: "",
    },
    Preset {
        name: "geo-satellite",
        about: "geostationary satellite broadband: 600 ms round trip, 25 Mbit/s down, \
                3 Mbit/s up",
        source: "latlab's choice: a bent pipe to 35,786 km is 2 x 35,786 km / c = 239 ms each \
                 way at the least; ground segment and slant range bring it near 300 ms",
        up: "delay=300ms rate=3mbit",
        down: "delay=300ms rate=25mbit",
        events: "",
    },
    Preset {
        name: "leo-satellite",
        about: "low-earth-orbit satellite broadband: 40 ms round trip with 5 ms jitter each \
                way, 100 Mbit/s down, 10 Mbit/s up",
        source: "latlab's choice, typical of LEO constellations at 550 km (4 ms to the \
                 satellite and back down; the rest is the ground network and scheduling)",
        up: "delay=20ms jitter=5ms jitter-dist=normal rate=10mbit",
        down: "delay=20ms jitter=5ms jitter-dist=normal rate=100mbit",
        events: "",
    },
    Preset {
        name: "lossy-wifi",
        about: "a lossy Wi-Fi link: 50 Mbit/s, 4 ms round trip, about 0.8% loss in bursts \
                (Gilbert-Elliott: 0.5% good to bad, 30% bad to good, half the frames lost in \
                the bad state: 1.6% of the time bad, stays of 3.3 frames)",
        source: "latlab's choice; the loss model is NetEm's gemodel",
        up: "delay=2ms jitter=1ms rate=50mbit loss=gemodel:0.5%,30%,50%,0%",
        down: "delay=2ms jitter=1ms rate=50mbit loss=gemodel:0.5%,30%,50%,0%",
        events: "",
    },
    // Unity's Multiplayer Tools network simulator: each preset's delay, jitter (uniform,
    // ±) and loss apply to every packet sent and received (ApplyMode.AllPackets), so each way.
    unity!(
        "unity-home-broadband",
        "Home Broadband [WIFI, Cable, Console, PC]",
        32,
        12,
        2
    ),
    unity!(
        "unity-home-fiber",
        "Home Fiber [Best real-world scenario]",
        10,
        1,
        0
    ),
    unity!(
        "unity-home-cable",
        "Home Cable [Optimal real-world scenario]",
        25,
        5,
        0
    ),
    unity!("unity-home-dsl", "Home DSL [ADSL or VDSL]", 30, 10, 0),
    unity!(
        "unity-home-satellite",
        "Home Satellite [low Earth orbit]",
        100,
        10,
        0
    ),
    unity!(
        "unity-home-congested",
        "Home Broadband with Congested Network",
        50,
        50,
        1
    ),
    unity!("unity-mobile-2g", "Mobile 2G [CDMA & GSM, '00]", 520, 50, 7),
    unity!(
        "unity-mobile-2.5g",
        "Mobile 2.5G [GPRS, G, '00]",
        480,
        40,
        7
    ),
    unity!(
        "unity-mobile-2.75g",
        "Mobile 2.75G [Edge, E, '06]",
        440,
        40,
        7
    ),
    unity!(
        "unity-mobile-3g",
        "Mobile 3G [WCDMA & UMTS, '03]",
        360,
        30,
        7
    ),
    unity!(
        "unity-mobile-3.5g",
        "Mobile 3.5G [HSDPA, H, '06]",
        160,
        30,
        6
    ),
    unity!(
        "unity-mobile-3.75g",
        "Mobile 3.75G [HDSDPA+, H+, '11]",
        130,
        30,
        6
    ),
    unity!("unity-mobile-4g", "Mobile 4G [4G, LTE, '13]", 100, 20, 4),
    unity!(
        "unity-mobile-4.5g",
        "Mobile 4.5G [4G+, LTE-A, '16]",
        80,
        20,
        4
    ),
    unity!("unity-mobile-5g", "Mobile 5G ['20]", 30, 20, 4),
    Preset {
        name: "unreal-average",
        about: "Unreal Engine's \"Average\" network emulation profile: 30 to 60 ms each way, \
                1% loss each way",
        source: UNREAL,
        up: "delay=45ms jitter=15ms loss=1%",
        down: "delay=45ms jitter=15ms loss=1%",
        events: "",
    },
    Preset {
        name: "unreal-bad",
        about: "Unreal Engine's \"Bad\" network emulation profile: 100 to 200 ms each way, \
                5% loss each way",
        source: UNREAL,
        up: "delay=150ms jitter=50ms loss=5%",
        down: "delay=150ms jitter=50ms loss=5%",
        events: "",
    },
    Preset {
        name: "unity-lag-spikes",
        about: "Unity's Home Broadband with its \"lag spike\" three times a minute: every \
                packet held back for 1 s (at 10 s, 30 s and 50 s of each minute, for 5 minutes)",
        source: "Unity Multiplayer Tools: NetworkSimulatorPresets.HomeBroadband, and \
                 NetworkEventsApi.TriggerLagSpike, which disconnects for the spike's length \
                 and reconnects (so an outage here, not more delay); the times are latlab's",
        up: "delay=32ms jitter=12ms loss=2%",
        down: "delay=32ms jitter=12ms loss=2%",
        events: UNITY_LAG_SPIKES,
    },
    Preset {
        name: "unity-mobile-4g-dropouts",
        about: "Unity's Mobile 4G, dropping every packet for 2 s out of every 22 s \
                (disconnect and reconnect), for as long as it runs",
        source: "Unity Multiplayer Tools: NetworkSimulatorPresets.Mobile4G, whose description \
                 says to expect players dropping all packets in bursts of 1-60 s and to handle \
                 reconnections; the 2 s in 22 s are latlab's",
        up: "delay=100ms jitter=20ms loss=4%",
        down: "delay=100ms jitter=20ms loss=4%",
        events: "0s flap 20s 2s",
    },
    Preset {
        name: "lag-spikes",
        about: "the cable tier with a 300 ms lag spike for 2 s at 15 s, 45 s, 75 s and 105 s",
        source: "latlab's choice: the delay spikes a congested home link shows",
        up: "delay=10ms jitter=1ms rate=10mbit",
        down: "delay=10ms jitter=1ms rate=100mbit",
        events: "15s spike 300ms for 2s\n45s spike 300ms for 2s\n75s spike 300ms for 2s\n\
                 105s spike 300ms for 2s",
    },
];

/// The preset called `name`; an unknown name is an error naming the known ones.
pub fn preset(name: &str) -> Result<&'static Preset, String> {
    PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        format!(
            "unknown preset {name:?}: expected one of {} (latlab emu --preset list shows them)",
            names().join(", ")
        )
    })
}

/// The presets' names.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

/// The keys of `name` for one direction: up (A→B) or down.
pub fn keys(name: &str, up: bool) -> Result<&'static str, String> {
    let p = preset(name)?;
    Ok(if up { p.up } else { p.down })
}

/// What `--preset list` prints: each preset with its values and its source.
pub fn list() -> String {
    let mut out = String::new();
    for p in PRESETS {
        out.push_str(&format!(
            "{}\n  {}\n  up (A→B):   {}\n  down (B→A): {}\n",
            p.name, p.about, p.up, p.down
        ));
        if !p.events.is_empty() {
            let events: Vec<&str> = p.events.lines().map(str::trim).collect();
            out.push_str(&format!("  events (both ways): {}\n", events.join("; ")));
        }
        out.push_str(&format!("  source: {}\n", p.source));
    }
    out
}

/// `--preset`'s help: every name with its source.
pub fn help() -> String {
    let mut help = String::from(
        "A named set of knobs, set first: --config, the flags and --a-to-b/--b-to-a override \
         it key by key; up is A→B. 'list' prints their values. Presets:",
    );
    for p in PRESETS {
        help.push_str(&format!(" {} ({});", p.name, p.about));
    }
    help.pop();
    help.push_str(
        ". Sources: Chrome's and Firefox's DevTools throttling presets, Unity's Multiplayer \
         Tools network simulator, Unreal Engine's network emulation profiles; the others are \
         latlab's choice, with their reasons in --preset list",
    );
    help
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_reads_as_a_valid_link_each_way() {
        for p in PRESETS {
            for (dir, spec) in [("up", p.up), ("down", p.down)] {
                let mut c = latlab_link::LinkConfig::default();
                crate::config::apply_spec(&mut c, dir == "up", p.name, spec)
                    .unwrap_or_else(|e| panic!("{} {dir}: {e}", p.name));
                c.validate()
                    .unwrap_or_else(|e| panic!("{} {dir}: {e}", p.name));
                assert!(c.delay_ns > 0, "{} {dir}", p.name);
                let mut c = latlab_link::LinkConfig::default();
                crate::config::apply_in(&mut c, dir == "up", "preset", p.name).unwrap();
                c.validate().unwrap();
                let has_events = c.schedule.is_some();
                assert_eq!(has_events, !p.events.is_empty(), "{} {dir}", p.name);
            }
        }
        let mut names = names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PRESETS.len(), "names are unique");
    }

    #[test]
    fn browser_presets_are_their_sources_numbers() {
        // Chrome: 1.6 * 1000 * 1000 / 8 * .9 bytes/s down, latency 150 * 3.75 ms.
        let slow_4g = preset("chrome-slow-4g").unwrap();
        let mut c = latlab_link::LinkConfig::default();
        crate::config::apply_spec(&mut c, false, "down", slow_4g.down).unwrap();
        assert_eq!(c.rate_bps, Some((1.6e6 * 0.9) as u64));
        assert_eq!(2 * c.delay_ns, (150.0 * 3.75 * 1e6) as u64);
        // Firefox: 4 * MBps down with MBps = 1024 * 1024 / 8 bytes/s, latency 20 ms.
        let lte = preset("firefox-lte").unwrap();
        let mut c = latlab_link::LinkConfig::default();
        crate::config::apply_spec(&mut c, false, "down", lte.down).unwrap();
        assert_eq!(c.rate_bps, Some(4 * 1024 * 1024));
        assert_eq!(2 * c.delay_ns, 20_000_000);
    }

    #[test]
    fn game_engine_presets_are_their_sources_numbers() {
        let link = |name: &str, up: bool| {
            let mut c = latlab_link::LinkConfig::default();
            crate::config::apply_in(&mut c, up, "preset", name).unwrap();
            c
        };
        // Unity's Mobile 4G: 100 ms, 20 ms jitter (uniform), 4% loss, on every packet.
        for up in [true, false] {
            let c = link("unity-mobile-4g", up);
            assert_eq!((c.delay_ns, c.jitter_ns), (100_000_000, 20_000_000));
            assert_eq!(c.jitter_dist, latlab_link::JitterDist::Uniform);
            assert_eq!(c.loss, latlab_link::LossModel::Bernoulli { p: 0.04 });
            assert!(c.schedule.is_none());
        }
        let fiber = link("unity-home-fiber", true);
        assert_eq!(
            (fiber.delay_ns, fiber.loss),
            (10_000_000, latlab_link::LossModel::None)
        );
        // Unreal's Bad: a lag uniform on 100..200 ms and 5% loss, out and in.
        let bad = link("unreal-bad", false);
        assert_eq!(bad.delay_ns - bad.jitter_ns, 100_000_000);
        assert_eq!(bad.delay_ns + bad.jitter_ns, 200_000_000);
        assert_eq!(bad.loss, latlab_link::LossModel::Bernoulli { p: 0.05 });
        // A scenario holds its events both ways: Unity's lag spike is a disconnection.
        for up in [true, false] {
            let c = link("unity-lag-spikes", up);
            let events = c.schedule.as_ref().unwrap().events();
            assert_eq!(events.len(), 15);
            assert_eq!(events[0].0, 10_000_000_000);
            assert_eq!(events[0].1.to_string(), "outage 1s");
        }
        let dropouts = link("unity-mobile-4g-dropouts", true);
        let flap = dropouts.schedule.as_ref().unwrap().events()[0].1;
        assert_eq!(flap.to_string(), "flap 20s 2s");
        assert!(list().contains("events (both ways): 15s spike 300ms for 2s; 45s spike"));
    }

    #[test]
    fn an_unknown_preset_names_the_known_ones() {
        let e = preset("5g").unwrap_err();
        assert!(
            e.starts_with("unknown preset \"5g\": expected one of chrome-3g, "),
            "{e}"
        );
        assert!(e.contains("lossy-wifi"), "{e}");
    }
}
