//! EC2 capacity reservations a NodeClass selects
//! (`spec.aws.capacityReservationSelectorTerms`): On-Demand Capacity
//! Reservations (`ReservationType` `default`) and Capacity Blocks for ML
//! (`capacity-block`), read with `DescribeCapacityReservations` and kept for
//! a short time ([`AwsOptions::reservation_ttl`](crate::AwsOptions)).
//!
//! An id term becomes the `CapacityReservationId.N` parameter (all id terms
//! in one call; EC2 answers `InvalidCapacityReservationId.NotFound` when one
//! of them does not exist, which surfaces as a `NotFound` error naming the
//! selector), a tags term one call with a `tag:<key>` filter per tag (the
//! tags of one term must all match). Every call filters on `state` `active`
//! and `scheduled` — the only states a launch can use now or later (EC2 API
//! Reference, `DescribeCapacityReservations`) — and the answers are checked
//! again, deduplicated by id.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{CapacityReservationState, CapacityReservationType, Filter};
use muster_crds::nodeclass::CapacityReservationSelectorTerm;
use muster_planner::{CapacityReservation, ReservationKind, Time};
use muster_provider_api::ProviderError;

use crate::client::failure;
use crate::errors::classify;

/// One selected reservation: where it is, what it holds, what is left.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    /// Its instance type (`InstanceType`); a reservation holds one type.
    pub instance_type: String,
    /// Its Availability Zone (`AvailabilityZone`).
    pub zone: String,
    /// Id, kind, `AvailableInstanceCount`, and the times it is usable.
    pub reservation: CapacityReservation,
}

impl Reservation {
    /// The reservation's id.
    pub fn id(&self) -> &str {
        &self.reservation.id
    }
}

/// One `DescribeCapacityReservations` query: ids, or tag filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// `CapacityReservationId.N`: every id term at once.
    Ids(Vec<String>),
    /// One tags term: `tag:<key>` = value, for every tag.
    Tags(BTreeMap<String, String>),
}

/// The queries of the selector terms (none for no terms).
pub fn queries(terms: &[CapacityReservationSelectorTerm]) -> Vec<Query> {
    let mut ids: Vec<String> = terms.iter().filter_map(|t| t.id.clone()).collect();
    ids.sort();
    ids.dedup();
    let mut out = Vec::new();
    if !ids.is_empty() {
        out.push(Query::Ids(ids));
    }
    for t in terms {
        if let Some(tags) = t.tags.as_ref().filter(|t| !t.is_empty()) {
            out.push(Query::Tags(tags.clone()));
        }
    }
    out
}

/// The selected reservations that are `active` or `scheduled`, sorted by id.
pub async fn describe(
    ec2: &aws_sdk_ec2::Client,
    terms: &[CapacityReservationSelectorTerm],
) -> Result<Vec<Reservation>, ProviderError> {
    let mut found: BTreeMap<String, Reservation> = BTreeMap::new();
    for q in queries(terms) {
        let state = Filter::builder()
            .name("state")
            .values("active")
            .values("scheduled")
            .build();
        let mut req = ec2.describe_capacity_reservations().filters(state);
        match &q {
            Query::Ids(ids) => req = req.set_capacity_reservation_ids(Some(ids.clone())),
            Query::Tags(tags) => {
                for (k, v) in tags {
                    req = req.filters(Filter::builder().name(format!("tag:{k}")).values(v).build());
                }
            }
        }
        let mut pages = req.into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| match classify(&failure(&e), None) {
                ProviderError::NotFound { what } => ProviderError::NotFound {
                    what: format!("spec.aws.capacityReservationSelectorTerms: {what}"),
                },
                other => other,
            })?;
            for r in page.capacity_reservations() {
                if let Some(r) = of_ec2(r) {
                    found.insert(r.id().to_string(), r);
                }
            }
        }
    }
    Ok(found.into_values().collect())
}

/// An EC2 reservation as a [`Reservation`]; `None` when it is in another
/// state than `active` or `scheduled`, or lacks its id, type or zone.
/// `starts_at` is set for Capacity Blocks only (an ODCR's `StartDate` is
/// when it was made, and it is usable from then).
pub fn of_ec2(r: &aws_sdk_ec2::types::CapacityReservation) -> Option<Reservation> {
    if !matches!(
        r.state(),
        Some(CapacityReservationState::Active | CapacityReservationState::Scheduled)
    ) {
        return None;
    }
    let kind = match r.reservation_type() {
        Some(CapacityReservationType::CapacityBlock) => ReservationKind::CapacityBlock,
        _ => ReservationKind::OnDemand,
    };
    let available = r
        .available_instance_count()
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0);
    Some(Reservation {
        instance_type: r.instance_type()?.to_string(),
        zone: r.availability_zone()?.to_string(),
        reservation: CapacityReservation {
            id: r.capacity_reservation_id()?.to_string(),
            kind,
            available,
            starts_at: (kind == ReservationKind::CapacityBlock)
                .then(|| r.start_date().map(|t| Time(t.secs())))
                .flatten(),
            ends_at: r.end_date().map(|t| Time(t.secs())),
        },
    })
}

/// The reservations read last, reused for a while and kept up to date with
/// the launches made since: each launch into a reservation takes one from
/// its `available` here, so that two launches within the time they are
/// reused do not both count on the last free slot. A launch EC2 refused for
/// lack of capacity leaves none.
#[derive(Debug, Default)]
pub struct Cache {
    read: Option<(Instant, Vec<Reservation>)>,
}

impl Cache {
    /// The reservations, when read less than `ttl` ago.
    pub fn fresh(&self, ttl: Duration) -> Option<Vec<Reservation>> {
        self.read
            .as_ref()
            .filter(|(at, _)| at.elapsed() < ttl)
            .map(|(_, r)| r.clone())
    }

    /// Keeps what was just read.
    pub fn store(&mut self, list: Vec<Reservation>) {
        self.read = Some((Instant::now(), list));
    }

    /// One reservation by id, however old the reading (its kind, type and
    /// zone do not change).
    pub fn get(&self, id: &str) -> Option<Reservation> {
        self.read
            .as_ref()
            .and_then(|(_, l)| l.iter().find(|r| r.id() == id).cloned())
    }

    /// One machine launched into `id`.
    pub fn took_one(&mut self, id: &str) {
        if let Some(r) = self.find_mut(id) {
            r.reservation.available = r.reservation.available.saturating_sub(1);
        }
    }

    /// EC2 said `id` has no room left.
    pub fn exhausted(&mut self, id: &str) {
        if let Some(r) = self.find_mut(id) {
            r.reservation.available = 0;
        }
    }

    fn find_mut(&mut self, id: &str) -> Option<&mut Reservation> {
        self.read
            .as_mut()
            .and_then(|(_, l)| l.iter_mut().find(|r| r.id() == id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::primitives::DateTime;

    fn term(id: Option<&str>, tags: &[(&str, &str)]) -> CapacityReservationSelectorTerm {
        CapacityReservationSelectorTerm {
            id: id.map(String::from),
            tags: (!tags.is_empty()).then(|| {
                tags.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
        }
    }

    #[test]
    fn id_terms_make_one_query_and_each_tags_term_its_own() {
        let terms = [
            term(Some("cr-b"), &[]),
            term(None, &[("team", "ml"), ("env", "prod")]),
            term(Some("cr-a"), &[]),
            term(Some("cr-b"), &[]),
        ];
        let q = queries(&terms);
        assert_eq!(q.len(), 2);
        assert_eq!(q[0], Query::Ids(vec!["cr-a".into(), "cr-b".into()]));
        match &q[1] {
            Query::Tags(t) => assert_eq!(t.len(), 2, "the tags of one term are ANDed"),
            other => panic!("{other:?}"),
        }
        assert!(queries(&[]).is_empty(), "no terms, no call");
    }

    fn ec2_reservation(
        state: CapacityReservationState,
        kind: CapacityReservationType,
    ) -> aws_sdk_ec2::types::CapacityReservation {
        aws_sdk_ec2::types::CapacityReservation::builder()
            .capacity_reservation_id("cr-0abc")
            .instance_type("p5.48xlarge")
            .availability_zone("us-east-1a")
            .available_instance_count(2)
            .state(state)
            .reservation_type(kind)
            .start_date(DateTime::from_secs(1_000))
            .end_date(DateTime::from_secs(90_000))
            .build()
    }

    #[test]
    fn capacity_blocks_carry_their_window_and_odcrs_only_their_end() {
        let cb = of_ec2(&ec2_reservation(
            CapacityReservationState::Scheduled,
            CapacityReservationType::CapacityBlock,
        ))
        .expect("a scheduled block is kept");
        assert_eq!(cb.reservation.kind, ReservationKind::CapacityBlock);
        assert_eq!(cb.reservation.starts_at, Some(Time(1_000)));
        assert_eq!(cb.reservation.ends_at, Some(Time(90_000)));
        assert_eq!(
            (cb.instance_type.as_str(), cb.zone.as_str()),
            ("p5.48xlarge", "us-east-1a")
        );
        let odcr = of_ec2(&ec2_reservation(
            CapacityReservationState::Active,
            CapacityReservationType::Default,
        ))
        .expect("an active ODCR is kept");
        assert_eq!(odcr.reservation.kind, ReservationKind::OnDemand);
        assert_eq!(odcr.reservation.starts_at, None);
        assert_eq!(odcr.reservation.available, 2);
        for gone in [
            CapacityReservationState::Expired,
            CapacityReservationState::Cancelled,
            CapacityReservationState::PaymentPending,
        ] {
            assert!(of_ec2(&ec2_reservation(gone, CapacityReservationType::Default)).is_none());
        }
    }

    #[test]
    fn launches_take_from_the_cached_count() {
        let mut c = Cache::default();
        let r = of_ec2(&ec2_reservation(
            CapacityReservationState::Active,
            CapacityReservationType::Default,
        ))
        .expect("kept");
        c.store(vec![r]);
        c.took_one("cr-0abc");
        let left = |c: &Cache| c.get("cr-0abc").map(|r| r.reservation.available);
        assert_eq!(left(&c), Some(1));
        c.took_one("cr-0abc");
        c.took_one("cr-0abc");
        assert_eq!(left(&c), Some(0), "never below zero");
        c.store(vec![]);
        assert!(c.get("cr-0abc").is_none());
        assert!(c.fresh(Duration::from_secs(60)).is_some());
        assert!(c.fresh(Duration::ZERO).is_none());
    }
}
