//! Conservation: GPU-hours busy equal the sum of completed jobs'
//! GPU-seconds; no job runs before it arrives or completes twice; every job
//! completes; nothing is busy that was not allocated.

mod common;

use common::{SMALL, run, scenario};

#[test]
fn busy_equals_completed_work_for_every_policy() {
    let (p, runs, s) = run(scenario(SMALL), None, 11);
    let total_work: f64 = p.jobs.iter().map(|j| j.gpu_seconds()).sum();
    for r in &runs {
        assert_eq!(
            r.violations, 0,
            "{}: a job ran before arrival or completed twice",
            r.name
        );
        let busy = r.rec.busy_gpu_secs;
        assert!(
            (busy - r.completed_gpu_secs).abs() <= 1e-6 * busy.max(1.0),
            "{}: busy {busy} != completed {}",
            r.name,
            r.completed_gpu_secs
        );
        assert_eq!(
            r.rec.completed as usize,
            p.jobs.len(),
            "{}: every job completes",
            r.name
        );
        assert!((busy - total_work).abs() <= 1e-6 * total_work, "{}", r.name);
        assert!(
            r.rec.gpu_alloc_secs + 1e-6 >= busy,
            "{}: busy exceeds allocated",
            r.name
        );
        let ps = &s.policies[&r.name];
        assert!(
            ps.cost_usd >= s.lower_bound_usd * 0.999,
            "{}: cost below the lower bound",
            r.name
        );
        assert_eq!(
            r.rec.waits.len(),
            p.jobs.len(),
            "{}: one first start per job",
            r.name
        );
    }
}
