//! Which keys a transaction touches: uniform over `[0, num)`, or zipfian with `--txn_zipf`
//! (theta in `(0, 1)`; YCSB uses 0.99), where key 0 is the hottest, key 1 the next, ...
//!
//! The zipfian draw is Gray et al.'s "Quickly generating billion-record synthetic databases"
//! (SIGMOD 1994) as in YCSB's `ZipfianGenerator`: with `zeta(n) = sum_{i=1..n} 1/i^theta`,
//! a uniform `u` in `[0, 1)` maps to 0 if `u * zeta(n) < 1`, to 1 if it is below
//! `1 + 0.5^theta`, else to `n * (eta * u - eta + 1)^(1 / (1 - theta))`. Example: with n =
//! 100,000 and theta = 0.99, key 0 gets ~8% of the draws and the 100 hottest keys ~43%.

use crate::random::Random64;

/// Draws key numbers.
#[derive(Clone, Debug)]
pub(crate) enum KeyChooser {
    /// Every key equally likely.
    Uniform { num: u64 },
    /// Zipfian with the constants precomputed (O(num) once).
    Zipf {
        num: u64,
        theta: f64,
        zeta_n: f64,
        alpha: f64,
        eta: f64,
    },
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl KeyChooser {
    /// Uniform if `theta` is 0 (or `num` < 2), else zipfian; `theta` must be in `[0, 1)`.
    pub(crate) fn new(num: u64, theta: f64) -> KeyChooser {
        let num = num.max(1);
        if theta <= 0.0 || num < 2 {
            return KeyChooser::Uniform { num };
        }
        let zeta_n = zeta(num, theta);
        let zeta_2 = zeta(2, theta);
        KeyChooser::Zipf {
            num,
            theta,
            zeta_n,
            alpha: 1.0 / (1.0 - theta),
            eta: (1.0 - (2.0 / num as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n),
        }
    }

    /// The next key number, in `[0, num)`.
    pub(crate) fn next(&self, rand: &mut Random64) -> u64 {
        match *self {
            KeyChooser::Uniform { num } => rand.next_u64() % num,
            KeyChooser::Zipf {
                num,
                theta,
                zeta_n,
                alpha,
                eta,
            } => {
                // 53 random bits: a uniform double in [0, 1).
                let u = (rand.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let uz = u * zeta_n;
                if uz < 1.0 {
                    return 0;
                }
                if uz < 1.0 + 0.5f64.powf(theta) {
                    return 1;
                }
                // A float in [0, num] truncated to an integer; `min` keeps it in range.
                let k = (num as f64 * (eta * u - eta + 1.0).powf(alpha)) as u64;
                k.min(num - 1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_stays_in_range() {
        let c = KeyChooser::new(10, 0.0);
        let mut r = Random64::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let k = c.next(&mut r) as usize;
            assert!(k < 10);
            if let Some(s) = seen.get_mut(k) {
                *s += 1;
            }
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
    }

    #[test]
    fn zipf_is_skewed_towards_small_keys() {
        let n = 100_000;
        let c = KeyChooser::new(n, 0.99);
        let mut r = Random64::new(7);
        let draws = 100_000;
        let (mut zero, mut top100) = (0, 0);
        for _ in 0..draws {
            let k = c.next(&mut r);
            assert!(k < n);
            zero += u32::from(k == 0);
            top100 += u32::from(k < 100);
        }
        // Expected ~8% and ~43% (see the module docs).
        assert!((6_000..10_000).contains(&zero), "{zero}");
        assert!((38_000..48_000).contains(&top100), "{top100}");
        assert!(matches!(
            KeyChooser::new(1, 0.99),
            KeyChooser::Uniform { num: 1 }
        ));
    }
}
