//! The jitter distributions as quantile functions in units of jitter, as NetEm's tables are.

use crate::JitterDist;

/// NetEm's tables hold 16-bit integers scaled by `NETEM_DIST_SCALE` = 8192.
const NETEM_DIST_SCALE: f64 = 8192.0;
/// Smallest value a NetEm table can hold, in units of jitter.
const TABLE_MIN: f64 = i16::MIN as f64 / NETEM_DIST_SCALE;
/// Largest value a NetEm table can hold, in units of jitter.
const TABLE_MAX: f64 = i16::MAX as f64 / NETEM_DIST_SCALE;

/// The value of the distribution at quantile `u` (0 ≤ u < 1), in units of jitter.
pub(crate) fn quantile(dist: &JitterDist, u: f64) -> f64 {
    debug_assert!((0.0..1.0).contains(&u), "a quantile is in 0..1, not {u}");
    match dist {
        JitterDist::Uniform => 2.0 * u - 1.0,
        JitterDist::Normal => normal(u),
        JitterDist::Pareto => pareto(u),
        JitterDist::ParetoNormal => {
            (0.25 * normal(u) + 0.75 * pareto(u)).clamp(TABLE_MIN, TABLE_MAX)
        }
        JitterDist::Table(table) => {
            debug_assert!(!table.is_empty(), "validated: a table has values");
            let index = ((u * table.len() as f64) as usize).min(table.len() - 1);
            table[index]
        }
    }
}

/// NetEm's `normal` table: the standard normal quantile, within what the table can hold.
fn normal(u: f64) -> f64 {
    inverse_normal_cdf(u).clamp(TABLE_MIN, TABLE_MAX)
}

/// NetEm's `pareto` table (`netem/pareto.c`): shape 3, shifted by its mean 1.5, scaled by 4/3.
fn pareto(u: f64) -> f64 {
    let survival = 1.0 - u;
    ((survival.powf(-1.0 / 3.0) - 1.5) * (4.0 / 3.0)).min(TABLE_MAX)
}

/// The standard normal quantile Φ⁻¹(p), by Acklam's rational approximation (relative error
/// below 1.2e-9). Returns ±infinity at 0 and 1.
pub(crate) fn inverse_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const P_LOW: f64 = 0.024_25;

    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < P_LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normal_quantile_matches_known_values() {
        assert_eq!(inverse_normal_cdf(0.5), 0.0);
        assert!((inverse_normal_cdf(0.975) - 1.959_963_985).abs() < 1e-8);
        assert!((inverse_normal_cdf(0.01) + 2.326_347_874).abs() < 1e-8);
        assert!((inverse_normal_cdf(0.999_9) - 3.719_016_485).abs() < 1e-7);
    }

    #[test]
    fn netem_tables_are_kept_within_four_jitters() {
        for dist in [
            JitterDist::Normal,
            JitterDist::Pareto,
            JitterDist::ParetoNormal,
        ] {
            for u in [0.0, 1e-12, 0.5, 1.0 - 1e-12] {
                let value = quantile(&dist, u);
                assert!(
                    (TABLE_MIN..=TABLE_MAX).contains(&value),
                    "{dist:?} at {u}: {value}"
                );
            }
        }
    }

    #[test]
    fn pareto_matches_netem_pareto_c() {
        // pareto.c: at u = 1/2 of the survival, (2^(1/3) − 1.5)·4/3.
        let expected = (2f64.powf(1.0 / 3.0) - 1.5) * 4.0 / 3.0;
        assert!((quantile(&JitterDist::Pareto, 0.5) - expected).abs() < 1e-12);
        // The smallest value: (1 − 1.5)·4/3.
        assert!((quantile(&JitterDist::Pareto, 0.0) + 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn uniform_covers_plus_minus_one_jitter_and_tables_are_indexed_by_quantile() {
        assert_eq!(quantile(&JitterDist::Uniform, 0.0), -1.0);
        assert_eq!(quantile(&JitterDist::Uniform, 0.5), 0.0);
        let table = JitterDist::Table(vec![-1.0, 0.0, 2.0, 5.0]);
        assert_eq!(quantile(&table, 0.0), -1.0);
        assert_eq!(quantile(&table, 0.3), 0.0);
        assert_eq!(quantile(&table, 0.999), 5.0);
    }
}
