//! Intervals for proportions: how sure a matrix cell's "k of n" is.
//!
//! - 0 < k < n: the **Wilson score interval** at 95 % (E. B. Wilson, "Probable inference, the
//!   law of succession, and statistical inference", JASA 22, 1927), which behaves well for small
//!   n and proportions near 0 or 1, unlike the normal approximation.
//! - k = 0 (or k = n): the **exact one-sided 95 % bound** (Clopper–Pearson with one tail):
//!   the true proportion is below `1 − 0.05^(1/n)` (above `0.05^(1/n)` for k = n). For large n
//!   this is the "rule of three", ≈ 3/n. A cell with 0 of 3 trials invalid reads "< 63.2 %":
//!   three clean trials do not show a strategy is safe, only that it fails rarely enough to miss
//!   three times in a row with 5 % chance.

use serde::{Deserialize, Serialize};

/// z for a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// How an [`Interval`] was computed.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum IntervalMethod {
    /// Wilson score interval, 95 % two-sided.
    Wilson,
    /// Exact one-sided 95 % bound (k = 0: upper bound `1 − 0.05^(1/n)`; k = n: lower bound `0.05^(1/n)`).
    ExactOneSided,
}

/// A proportion k/n with its 95 % interval; every figure is a fraction in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Events counted.
    pub k: u64,
    /// Trials (or critical sections) they were counted in.
    pub n: u64,
    /// k / n.
    pub point: f64,
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
    /// How the bounds were computed.
    pub method: IntervalMethod,
}

impl Interval {
    /// The interval of `k` events in `n` trials (`k` is capped at `n`); `None` for n = 0
    /// (no evidence, no interval).
    pub fn of(k: u64, n: u64) -> Option<Self> {
        if n == 0 {
            return None;
        }
        let k = k.min(n);
        let nf = n as f64;
        let point = k as f64 / nf;
        if k == 0 {
            return Some(Self {
                k,
                n,
                point,
                low: 0.0,
                high: 1.0 - 0.05f64.powf(1.0 / nf),
                method: IntervalMethod::ExactOneSided,
            });
        }
        if k == n {
            return Some(Self {
                k,
                n,
                point,
                low: 0.05f64.powf(1.0 / nf),
                high: 1.0,
                method: IntervalMethod::ExactOneSided,
            });
        }
        let z2 = Z95 * Z95;
        let denom = 1.0 + z2 / nf;
        let centre = (point + z2 / (2.0 * nf)) / denom;
        let half = Z95 * (point * (1.0 - point) / nf + z2 / (4.0 * nf * nf)).sqrt() / denom;
        Some(Self {
            k,
            n,
            point,
            low: (centre - half).max(0.0),
            high: (centre + half).min(1.0),
            method: IntervalMethod::Wilson,
        })
    }

    /// The interval for people, as percentages scaled by `scale` (1.0 for a share of trials,
    /// 1000.0 for "per 1,000 sections" — then without `%`): `< 63.2 %` for 0 of n,
    /// `> 36.8 %` for n of n, `0.50 % (0.21–1.17 %)` otherwise.
    pub fn text(&self, per_thousand: bool) -> String {
        let (scale, unit) = if per_thousand {
            (1000.0, "‰")
        } else {
            (100.0, " %")
        };
        let f = |x: f64| {
            let v = x * scale;
            if v != 0.0 && v.abs() < 0.1 {
                format!("{v:.3}")
            } else {
                format!("{v:.1}")
            }
        };
        match self.method {
            IntervalMethod::ExactOneSided if self.k == 0 => format!("< {}{unit}", f(self.high)),
            IntervalMethod::ExactOneSided => format!("> {}{unit}", f(self.low)),
            IntervalMethod::Wilson => format!(
                "{}{unit} ({}–{}{unit})",
                f(self.point),
                f(self.low),
                f(self.high)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_method_names_match_serde() {
        crate::variant_names::assert_names_match_serde::<IntervalMethod>();
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() < tol
    }

    #[test]
    fn zero_of_three_is_an_exact_upper_bound() {
        let i = Interval::of(0, 3).unwrap();
        assert_eq!(i.method, IntervalMethod::ExactOneSided);
        assert_eq!((i.point, i.low), (0.0, 0.0));
        // 1 − 0.05^(1/3) = 0.63160
        assert!(close(i.high, 0.631_596, 1e-5), "{}", i.high);
        assert_eq!(i.text(false), "< 63.2 %");
    }

    #[test]
    fn three_of_three_is_an_exact_lower_bound() {
        let i = Interval::of(3, 3).unwrap();
        assert_eq!(i.method, IntervalMethod::ExactOneSided);
        assert!(close(i.low, 0.368_403, 1e-5), "{}", i.low);
        assert_eq!(i.high, 1.0);
        assert_eq!(i.text(false), "> 36.8 %");
    }

    #[test]
    fn five_of_a_thousand_is_wilson() {
        let i = Interval::of(5, 1000).unwrap();
        assert_eq!(i.method, IntervalMethod::Wilson);
        assert_eq!(i.point, 0.005);
        // Wilson 95 % for 5/1000: 0.00214 to 0.01165 (centre 0.00689, half-width 0.00476).
        assert!(close(i.low, 0.002_137, 2e-6), "{}", i.low);
        assert!(close(i.high, 0.011_650, 2e-6), "{}", i.high);
        assert_eq!(i.text(true), "5.0‰ (2.1–11.7‰)");
    }

    #[test]
    fn no_trials_no_interval_and_k_is_capped() {
        assert!(Interval::of(0, 0).is_none());
        let i = Interval::of(7, 5).unwrap();
        assert_eq!((i.k, i.point), (5, 1.0));
    }

    #[test]
    fn the_episode_counts_of_a_cell() {
        // 0 of 30 exposed episodes: damage below 1 − 0.05^(1/30) = 9.50 %.
        let i = Interval::of(0, 30).unwrap();
        assert_eq!(i.method, IntervalMethod::ExactOneSided);
        assert!(close(i.high, 0.095_034, 1e-6), "{}", i.high);
        assert_eq!(i.text(false), "< 9.5 %");
        // 3 of 30: Wilson, centre 14.54 %, from 3.46 % to 25.62 %.
        let i = Interval::of(3, 30).unwrap();
        assert_eq!(i.method, IntervalMethod::Wilson);
        assert!(close(i.low, 0.034_600, 1e-6), "{}", i.low);
        assert!(close(i.high, 0.256_211, 1e-6), "{}", i.high);
        assert_eq!(i.text(false), "10.0 % (3.5–25.6 %)");
        // 30 of 30: above 0.05^(1/30) = 90.50 %.
        let i = Interval::of(30, 30).unwrap();
        assert!(close(i.low, 0.904_966, 1e-6), "{}", i.low);
        assert_eq!(i.text(false), "> 90.5 %");
        // 0 of 300: below 0.99 %, under the 1 % that `--episodes 300` promises.
        let i = Interval::of(0, 300).unwrap();
        assert!(close(i.high, 0.009_936, 1e-6), "{}", i.high);
        assert!(i.high < 0.01);
        assert_eq!(i.text(false), "< 1.0 %");
    }

    #[test]
    fn large_n_zero_matches_the_rule_of_three() {
        let i = Interval::of(0, 3000).unwrap();
        assert!(close(i.high, 3.0 / 3000.0, 2e-6), "{}", i.high);
    }
}
