//! Whether a study's options give each point enough samples for the percentiles its report
//! reads: checked when the study starts, so a run too short for them says so before it spends
//! its time, with the numbers, rather than only in a report of "too few samples".

use std::time::Duration;

use latlab_lab::units::format_duration;
use latlab_stats::{min_samples, Quantile, Z_95};

/// The warning for a study whose points each measure `measured` (what is left of its sending
/// time after the warm-up) at `rate_pps` when that gives fewer samples than a 95% interval of
/// `quantile` needs; `None` when it gives enough. `what` names the study and `flag` the option
/// that lengthens a point; `warmup` is what a point leaves out before it counts.
pub fn too_few_for(
    what: &str,
    quantile: Quantile,
    rate_pps: f64,
    sending: Duration,
    warmup: Duration,
    flag: &str,
) -> Option<String> {
    let measured = sending.saturating_sub(warmup);
    let expected = (measured.as_secs_f64() * rate_pps).floor() as u64;
    let needed = min_samples(quantile.q, Z_95);
    if expected >= needed || rate_pps <= 0.0 {
        return None;
    }
    // The whole seconds that give the samples, warm-up included.
    let enough =
        Duration::from_secs((needed as f64 / rate_pps + warmup.as_secs_f64()).ceil() as u64);
    Some(format!(
        "warning: {what}: each point expects about {expected} samples ({} after a {} warm-up at \
         {rate_pps:.0} per second), but a {} needs {needed}: every {} of the report will read \
         \"too few samples\"; {flag} {} or more gives enough",
        format_duration(measured),
        format_duration(warmup),
        quantile.label,
        quantile.label,
        format_duration(enough),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_too_short_for_its_p99_says_how_many_samples_and_how_long() {
        // bufferbloat --duration 3s: 100 messages a second after a 200 ms warm-up.
        let warning = too_few_for(
            "study bufferbloat",
            Quantile::P99,
            100.0,
            Duration::from_secs(3),
            Duration::from_millis(200),
            "--duration",
        )
        .unwrap();
        let needed = min_samples(0.99, Z_95);
        assert_eq!(needed, 381);
        assert_eq!(
            warning,
            "warning: study bufferbloat: each point expects about 280 samples (2800ms after a \
             200ms warm-up at 100 per second), but a p99 needs 381: every p99 of the report will \
             read \"too few samples\"; --duration 5s or more gives enough"
        );
        // 5 s gives 480 samples: no warning.
        assert_eq!(
            too_few_for(
                "study bufferbloat",
                Quantile::P99,
                100.0,
                Duration::from_secs(5),
                Duration::from_millis(200),
                "--duration",
            ),
            None
        );
    }

    #[test]
    fn a_point_shorter_than_its_warmup_expects_none() {
        let warning = too_few_for(
            "study emulator",
            Quantile::P99_9,
            1000.0,
            Duration::from_millis(100),
            Duration::from_millis(300),
            "--duration",
        )
        .unwrap();
        assert!(warning.contains("about 0 samples"), "{warning}");
        assert!(warning.contains("p99.9 needs 3838"), "{warning}");
    }
}
