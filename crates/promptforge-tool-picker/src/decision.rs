//! The four-way decision over a ranked list of scores: pure, so every path and boundary is
//! tested with exact numbers.

use crate::Config;

/// A decision in terms of catalog positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Absent,
    Bind(usize),
    Duplicate(Vec<usize>),
    Ambiguous(Vec<usize>),
}

/// Decides over `ranked` (catalog position, score), best first.
///
/// Precedence is fixed: absent, duplicate, bind, ambiguous; every boundary is inclusive.
/// `twins(a, b)` says whether two tools are same-server twins (measured between the tools'
/// own embeddings, never against the need).
pub(crate) fn decide(
    ranked: &[(usize, f32)],
    config: &Config,
    twins: impl Fn(usize, usize) -> bool,
) -> Decision {
    let Some(&(leader, top)) = ranked.first() else {
        return Decision::Absent;
    };
    let runner_up = ranked.get(1).map(|&(_, s)| s);

    // Absent, unless the solo-candidate rule applies.
    if top < config.similarity_floor() {
        let solo = top >= config.solo_floor() && runner_up.is_none_or(|s| s < config.solo_floor());
        return if solo {
            Decision::Bind(leader)
        } else {
            Decision::Absent
        };
    }
    let candidates = candidate_count(ranked, config);
    let candidates = &ranked[..candidates];

    // Duplicate: the leader has same-server twins among the candidates.
    let group: Vec<usize> = std::iter::once(leader)
        .chain(
            candidates[1..]
                .iter()
                .map(|&(i, _)| i)
                .filter(|&i| twins(leader, i)),
        )
        .collect();
    if group.len() > 1 {
        return Decision::Duplicate(group);
    }

    // Bind: the only candidate, or a clear leader.
    let Some(&(_, second)) = candidates.get(1) else {
        return Decision::Bind(leader);
    };
    if top - second >= config.margin() {
        return Decision::Bind(leader);
    }

    // Ambiguous: the candidates within the margin of the leader, at most `top_k` (never
    // fewer than two).
    let limit = config.top_k().get().max(2);
    let group: Vec<usize> = candidates
        .iter()
        .take_while(|&&(_, s)| top - s < config.margin())
        .take(limit)
        .map(|&(i, _)| i)
        .collect();
    Decision::Ambiguous(group)
}

/// How many leading entries of `ranked` reach the similarity floor.
pub(crate) fn candidate_count(ranked: &[(usize, f32)], config: &Config) -> usize {
    ranked
        .iter()
        .take_while(|&&(_, s)| s >= config.similarity_floor())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Floor 0.5, solo 0.25, margin 0.125, top_k 3: all exactly representable.
    fn config() -> Config {
        Config::default()
            .with_similarity_floor(0.5)
            .unwrap()
            .with_solo_floor(0.25)
            .unwrap()
            .with_margin(0.125)
            .unwrap()
            .with_top_k(3)
            .unwrap()
    }

    fn ranked(scores: &[f32]) -> Vec<(usize, f32)> {
        scores.iter().copied().enumerate().collect()
    }

    fn no_twins(_: usize, _: usize) -> bool {
        false
    }

    #[track_caller]
    fn check(scores: &[f32], expected: Decision) {
        assert_eq!(decide(&ranked(scores), &config(), no_twins), expected);
    }

    #[test]
    fn empty_catalog_is_absent() {
        check(&[], Decision::Absent);
    }

    #[test]
    fn below_both_floors_is_absent() {
        check(&[0.2, 0.1], Decision::Absent);
        check(&[0.24], Decision::Absent);
    }

    #[test]
    fn floor_is_inclusive() {
        check(&[0.5], Decision::Bind(0));
        check(&[0.5, 0.375], Decision::Bind(0));
    }

    #[test]
    fn solo_candidate_binds_between_the_floors() {
        check(&[0.375], Decision::Bind(0));
        check(&[0.375, 0.125], Decision::Bind(0));
        // The solo floor is inclusive for the leader...
        check(&[0.25, 0.125], Decision::Bind(0));
    }

    #[test]
    fn two_candidates_between_the_floors_abstain() {
        check(&[0.375, 0.25], Decision::Absent);
        check(&[0.375, 0.3], Decision::Absent);
    }

    #[test]
    fn solo_rule_is_off_when_solo_floor_reaches_similarity_floor() {
        let config = config().with_solo_floor(0.5).unwrap();
        assert_eq!(
            decide(&ranked(&[0.375]), &config, no_twins),
            Decision::Absent
        );
    }

    #[test]
    fn margin_is_inclusive() {
        // 0.75 - 0.625 == 0.125 exactly: a clear leader.
        check(&[0.75, 0.625], Decision::Bind(0));
        check(&[0.75, 0.5], Decision::Bind(0));
    }

    #[test]
    fn runner_up_below_the_floor_does_not_compete() {
        check(&[0.5, 0.4375], Decision::Bind(0));
    }

    #[test]
    fn near_tie_is_ambiguous_and_capped_at_top_k() {
        check(&[0.75, 0.6875], Decision::Ambiguous(vec![0, 1]));
        check(
            &[0.75, 0.7, 0.69, 0.68, 0.67],
            Decision::Ambiguous(vec![0, 1, 2]),
        );
        // Candidates at or beyond the margin are not part of the group.
        check(&[0.75, 0.7, 0.625, 0.6], Decision::Ambiguous(vec![0, 1]));
    }

    #[test]
    fn ambiguous_group_has_at_least_two_even_with_top_k_one() {
        let config = config().with_top_k(1).unwrap();
        assert_eq!(
            decide(&ranked(&[0.75, 0.7, 0.69]), &config, no_twins),
            Decision::Ambiguous(vec![0, 1])
        );
    }

    #[test]
    fn duplicate_precedes_bind_and_ambiguous() {
        let twins = |a: usize, b: usize| (a, b) == (0, 2);
        // A clear leader with a twin among the candidates: duplicate, not bind.
        assert_eq!(
            decide(&ranked(&[0.9, 0.6, 0.55]), &config(), twins),
            Decision::Duplicate(vec![0, 2])
        );
        // A near tie with a twin: duplicate, not ambiguous.
        assert_eq!(
            decide(&ranked(&[0.9, 0.89, 0.88]), &config(), twins),
            Decision::Duplicate(vec![0, 2])
        );
    }

    #[test]
    fn twins_below_the_floor_do_not_make_a_duplicate() {
        let twins = |a: usize, b: usize| (a, b) == (0, 1);
        assert_eq!(
            decide(&ranked(&[0.9, 0.4]), &config(), twins),
            Decision::Bind(0)
        );
    }

    #[test]
    fn absent_precedes_duplicate() {
        let twins = |_: usize, _: usize| true;
        assert_eq!(
            decide(&ranked(&[0.2, 0.2]), &config(), twins),
            Decision::Absent
        );
    }

    #[test]
    fn candidate_count_is_inclusive() {
        assert_eq!(candidate_count(&ranked(&[0.75, 0.5, 0.49]), &config()), 2);
        assert_eq!(candidate_count(&ranked(&[]), &config()), 0);
    }
}
