//! The simulated cloud's reserved capacity and network: a reservation is
//! sold as one `reserved` offering at price zero with `available` = count
//! less the machines in it, refuses launches beyond its count and outside
//! its window, and a Capacity Block's machines are taken back 30 minutes
//! before its end; machines carry block and rack layers, and a placement
//! group's machines share a rack while it has room.

use muster_planner::{CapacityType, Dur, OfferingKey, Price, ReservationKind, Time};
use muster_provider_sim::behaviour::CloudBehaviour;
use muster_provider_sim::catalog::builtin_offerings;
use muster_provider_sim::cloud::{LaunchError, SimCloud};
use muster_provider_sim::{NetworkLayout, Reservation};

fn odcr(count: u32) -> Reservation {
    Reservation {
        id: "cr-odcr".into(),
        kind: ReservationKind::OnDemand,
        instance_type: "p4d.24xlarge".into(),
        zone: "us-east-1a".into(),
        count,
        starts_at: None,
        ends_at: None,
        upfront_usd: None,
    }
}

fn block() -> Reservation {
    Reservation {
        id: "cr-block".into(),
        kind: ReservationKind::CapacityBlock,
        instance_type: "p5.48xlarge".into(),
        zone: "us-east-1b".into(),
        count: 2,
        starts_at: Some(Dur::hours(10)),
        ends_at: Some(Dur::hours(34)),
        upfront_usd: None,
    }
}

fn cloud(reservations: Vec<Reservation>, topology: Option<NetworkLayout>) -> SimCloud {
    let b = CloudBehaviour {
        reservations,
        topology,
        ..Default::default()
    };
    SimCloud::new(builtin_offerings(), &b, 3).expect("cloud")
}

fn reserved_key(c: &SimCloud, id: &str) -> OfferingKey {
    c.offerings()
        .iter()
        .find(|o| o.reservation.as_ref().is_some_and(|r| r.id == id))
        .map(|o| o.key())
        .expect("a reserved offering")
}

fn available(c: &SimCloud, key: &OfferingKey) -> u32 {
    let i = c.index_of(key).expect("offering");
    c.offering(i)
        .and_then(|o| o.reservation.as_ref())
        .map(|r| r.available)
        .expect("reservation")
}

#[test]
fn a_reservation_is_one_reserved_offering_at_price_zero() {
    let c = cloud(vec![odcr(3), block()], None);
    let reserved: Vec<_> = c
        .offerings()
        .iter()
        .filter(|o| o.capacity_type == CapacityType::Reserved)
        .collect();
    assert_eq!(reserved.len(), 2);
    for o in &reserved {
        assert_eq!(o.price, Some(Price::ZERO));
        assert_eq!(
            o.key().reservation,
            o.reservation.as_ref().map(|r| r.id.clone())
        );
    }
    let b = reserved
        .iter()
        .find(|o| o.instance_type == "p5.48xlarge")
        .and_then(|o| o.reservation.clone())
        .expect("block");
    assert_eq!(b.kind, ReservationKind::CapacityBlock);
    assert_eq!(b.starts_at, Some(Time(10 * 3600)));
    assert_eq!(b.ends_at, Some(Time(34 * 3600)));
    // The on-demand offering it was made from is still sold.
    assert!(
        c.offerings()
            .iter()
            .any(|o| o.instance_type == "p4d.24xlarge"
                && o.zone == "us-east-1a"
                && o.capacity_type == CapacityType::OnDemand)
    );
}

#[test]
fn launches_beyond_the_count_are_capacity_errors_and_available_follows() {
    let mut c = cloud(vec![odcr(2)], None);
    let key = reserved_key(&c, "cr-odcr");
    assert_eq!(available(&c, &key), 2);
    assert!(c.launch(&key, "a", Time(0)).is_ok());
    assert_eq!(available(&c, &key), 1);
    assert!(c.launch(&key, "b", Time(0)).is_ok());
    assert_eq!(available(&c, &key), 0);
    assert_eq!(
        c.launch(&key, "c", Time(0)),
        Err(LaunchError::InsufficientCapacity(key.clone()))
    );
    c.machine_gone(&key);
    assert_eq!(available(&c, &key), 1);
    let plan = c.launch(&key, "d", Time(0)).expect("room again");
    assert_eq!(
        plan.reclaim_at, None,
        "an ODCR without end is never reclaimed"
    );
    assert_eq!(plan.interrupt_at, None);
}

#[test]
fn an_odcr_sells_until_its_end_and_its_machines_outlive_it() {
    let mut c = cloud(
        vec![Reservation {
            ends_at: Some(Dur::hours(5)),
            ..odcr(2)
        }],
        None,
    );
    let key = reserved_key(&c, "cr-odcr");
    let plan = c.launch(&key, "in", Time(5 * 3600 - 1)).expect("in window");
    assert_eq!(
        plan.reclaim_at, None,
        "an expired ODCR's instances keep running as on-demand"
    );
    assert!(c.launch(&key, "late", Time(5 * 3600)).is_err());
}

#[test]
fn a_capacity_block_sells_only_in_its_window_and_is_reclaimed_30_min_before_its_end() {
    let mut c = cloud(vec![block()], None);
    let key = reserved_key(&c, "cr-block");
    assert!(c.launch(&key, "early", Time(10 * 3600 - 1)).is_err());
    let plan = c.launch(&key, "in", Time(10 * 3600)).expect("in window");
    assert_eq!(plan.reclaim_at, Some(Time(34 * 3600 - 30 * 60)));
    // No launch once EC2 has started taking the block back.
    assert!(c.launch(&key, "late", Time(34 * 3600 - 30 * 60)).is_err());
    assert!(
        c.launch(&key, "last", Time(34 * 3600 - 30 * 60 - 1))
            .is_ok()
    );
}

#[test]
fn reservations_cost_their_whole_window() {
    let b = block();
    // 2 machines × 24 h at $10/h.
    assert!((b.cost_usd(10.0, Time(999_999)) - 480.0).abs() < 1e-9);
    let open = odcr(3);
    assert!((open.cost_usd(2.0, Time(7200)) - 12.0).abs() < 1e-9);
    let upfront = Reservation {
        upfront_usd: Some(99.0),
        ..block()
    };
    assert_eq!(upfront.cost_usd(10.0, Time(0)), 99.0);
}

#[test]
fn bad_reservations_are_refused() {
    let unknown = Reservation {
        instance_type: "p9.huge".into(),
        ..odcr(1)
    };
    let b = CloudBehaviour {
        reservations: vec![unknown],
        ..Default::default()
    };
    assert!(SimCloud::new(builtin_offerings(), &b, 1).is_err());
    let endless_block = Reservation {
        ends_at: None,
        ..block()
    };
    assert!(endless_block.validate().is_err());
    let empty = odcr(0);
    assert!(empty.validate().is_err());
    let twice = CloudBehaviour {
        reservations: vec![odcr(1), odcr(2)],
        ..Default::default()
    };
    assert!(twice.validate().is_err());
}

#[test]
fn machines_get_block_and_rack_and_a_placement_group_shares_a_rack_while_it_has_room() {
    let layout = NetworkLayout {
        nodes_per_rack: 2,
        racks_per_block: 4,
        blocks_per_zone: 3,
    };
    let mut c = cloud(vec![], Some(layout));
    let key = c
        .offerings()
        .iter()
        .find(|o| o.instance_type == "p4d.24xlarge" && o.capacity_type == CapacityType::OnDemand)
        .map(|o| o.key())
        .expect("p4d");
    let mut racks = std::collections::BTreeSet::new();
    for i in 0..40 {
        let p = c.launch(&key, &format!("m{i}"), Time(0)).expect("launch");
        assert_eq!(p.network.len(), 2);
        assert!(p.network[1].starts_with(&p.network[0]), "{:?}", p.network);
        racks.insert(p.network[1].clone());
    }
    assert!(
        racks.len() > 4,
        "loose machines spread over racks: {racks:?}"
    );
    let nets: Vec<Vec<String>> = (0..5)
        .map(|i| {
            c.launch_in(&key, &format!("g{i}"), Time(0), Some("pg-1"))
                .expect("launch")
                .network
        })
        .collect();
    assert_eq!(nets[0], nets[1], "one rack while it has room");
    assert_ne!(nets[1][1], nets[2][1], "the next rack once it is full");
    assert!(
        nets.iter().all(|n| n[0] == nets[0][0]),
        "one block: {nets:?}"
    );
    // Without a topology, machines say nothing of their network.
    let mut flat = cloud(vec![], None);
    assert!(
        flat.launch(&key, "x", Time(0))
            .expect("launch")
            .network
            .is_empty()
    );
}
