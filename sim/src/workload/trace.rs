//! The trace CSV reader: `submit_s,duration_s,gpus,workers,team` with
//! optional `gpu_model` and `priority` columns, in any order after a
//! required header. Every bad row is an error that names its line and
//! column; nothing is dropped. Rows need not be sorted (jobs are ordered by
//! submit time, then line).

use muster_planner::{Dur, GpuModel, Time};
use muster_provider_sim::csv_rows::records;

use super::{Job, pod_gpu_millis};

/// Why a trace could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// The header is missing a column or has an unknown one.
    #[error("line 1: {0}")]
    Header(String),
    /// A bad row.
    #[error("line {line}: column {column}: {message}")]
    Row {
        /// 1-based line number.
        line: usize,
        /// Column name (`*` for the whole row).
        column: String,
        /// What is wrong.
        message: String,
    },
    /// No jobs.
    #[error("trace has no jobs")]
    Empty,
}

const REQUIRED: [&str; 5] = ["submit_s", "duration_s", "gpus", "workers", "team"];
const OPTIONAL: [&str; 3] = ["gpu_model", "priority", "checkpoint_s"];

/// Parses a trace.
pub fn parse_trace(text: &str) -> Result<Vec<Job>, TraceError> {
    let mut records = records(text);
    let header = match records.next() {
        None => {
            return Err(TraceError::Header(format!(
                "missing header (expected {})",
                REQUIRED.join(",")
            )));
        }
        Some(Err(bad)) => return Err(TraceError::Header(bad.message)),
        Some(Ok(h)) => h,
    };
    let cols: Vec<&str> = header.fields.iter().map(String::as_str).collect();
    for want in REQUIRED {
        if !cols.contains(&want) {
            return Err(TraceError::Header(format!(
                "missing column {want:?} (header must have {}; optional {})",
                REQUIRED.join(","),
                OPTIONAL.join(",")
            )));
        }
    }
    for (i, c) in cols.iter().enumerate() {
        if !REQUIRED.contains(c) && !OPTIONAL.contains(c) {
            return Err(TraceError::Header(format!("unknown column {c:?}")));
        }
        if cols[..i].contains(c) {
            return Err(TraceError::Header(format!("duplicate column {c:?}")));
        }
    }
    let pos = |name: &str| cols.iter().position(|c| *c == name);
    let (i_submit, i_dur, i_gpus, i_workers, i_team) = (
        pos("submit_s").unwrap_or(0),
        pos("duration_s").unwrap_or(0),
        pos("gpus").unwrap_or(0),
        pos("workers").unwrap_or(0),
        pos("team").unwrap_or(0),
    );
    let (i_model, i_prio, i_ckpt) = (pos("gpu_model"), pos("priority"), pos("checkpoint_s"));
    let mut jobs = Vec::new();
    for rec in records {
        let rec = rec.map_err(|bad| TraceError::Row {
            line: bad.line,
            column: "*".into(),
            message: bad.message,
        })?;
        let line = rec.line;
        let f: Vec<&str> = rec.fields.iter().map(String::as_str).collect();
        let err = |column: &str, message: String| TraceError::Row {
            line,
            column: column.to_string(),
            message,
        };
        if f.len() != cols.len() {
            return Err(err(
                "*",
                format!("expected {} fields, found {}", cols.len(), f.len()),
            ));
        }
        let secs = |idx: usize, name: &str, min: u64| -> Result<u64, TraceError> {
            let v = f[idx];
            let n: u64 = v
                .parse()
                .map_err(|_| err(name, format!("{v:?} is not a whole number of seconds")))?;
            if n < min {
                return Err(err(name, format!("{n} must be at least {min}")));
            }
            Ok(n)
        };
        let submit = secs(i_submit, "submit_s", 0)?;
        let duration = secs(i_dur, "duration_s", 1)?;
        let g = f[i_gpus];
        let gpus: f64 = g
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite() && *x > 0.0)
            .ok_or_else(|| err("gpus", format!("{g:?} is not a positive number")))?;
        if gpus > 100_000.0 {
            return Err(err("gpus", format!("{gpus} is implausibly large")));
        }
        let w = f[i_workers];
        let workers: u32 = w
            .parse()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| err("workers", format!("{w:?} is not a whole number ≥ 1")))?;
        let pod = pod_gpu_millis(gpus, workers).ok_or_else(|| {
            err(
                "workers",
                format!("{gpus} GPUs cannot be split over {workers} workers (a fractional GPU job has one worker)"),
            )
        })?;
        if f64::from(workers) > gpus.ceil().max(1.0) {
            return Err(err(
                "workers",
                format!("{workers} workers for {gpus} GPUs: every worker needs at least one GPU"),
            ));
        }
        let team = match f[i_team] {
            "" => "default".to_string(),
            t => t.to_string(),
        };
        let gpu_model = match i_model.map(|i| f[i]) {
            None | Some("") => None,
            Some(m) => Some(GpuModel::new(m)),
        };
        let priority = match i_prio.map(|i| f[i]) {
            None | Some("") => 0,
            Some(p) => p
                .parse()
                .map_err(|_| err("priority", format!("{p:?} is not an integer")))?,
        };
        let checkpoint = match i_ckpt.map(|i| f[i]) {
            None | Some("") => None,
            Some(_) => Some(Dur::secs(secs(i_ckpt.unwrap_or(0), "checkpoint_s", 0)?)),
        };
        jobs.push(Job {
            id: 0,
            submit: Time(i64::try_from(submit).map_err(|_| err("submit_s", "too large".into()))?),
            duration: Dur::secs(duration),
            gpus,
            workers,
            pod_gpu_millis: pod,
            team,
            gpu_model,
            priority,
            checkpoint,
            line,
        });
    }
    if jobs.is_empty() {
        return Err(TraceError::Empty);
    }
    jobs.sort_by_key(|j| (j.submit, j.line));
    for (i, j) in jobs.iter_mut().enumerate() {
        j.id = i;
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "submit_s,duration_s,gpus,workers,team";

    #[test]
    fn parses_a_trace() {
        let t = format!(
            "{H},gpu_model,priority,checkpoint_s\n10,60,1,1,a,,,\n5,30,16,2,b,A100,3,600\n7,30,0.5,1,,,,0\n"
        );
        let jobs = parse_trace(&t).expect("parses");
        assert_eq!(jobs.len(), 3);
        assert_eq!(jobs[0].submit, Time(5));
        assert_eq!(jobs[0].pod_gpu_millis, 8000);
        assert_eq!(jobs[0].gpu_model, Some(GpuModel::new("A100")));
        assert_eq!(jobs[0].priority, 3);
        assert_eq!(jobs[0].checkpoint, Some(Dur::secs(600)));
        assert_eq!(jobs[1].checkpoint, Some(Dur::secs(0)));
        assert_eq!(jobs[2].checkpoint, None);
        assert_eq!(jobs[1].team, "default");
        assert_eq!(jobs[1].pod_gpu_millis, 500);
        assert_eq!(jobs[2].line, 2);
        assert!(jobs.iter().enumerate().all(|(i, j)| j.id == i));
    }

    #[test]
    fn quoted_fields_bom_and_crlf() {
        let t = format!(
            "\u{feff}{H},gpu_model\r\n1,2,1,1,\"team, one\",\"A100\"\r\n\r\n3,4,2,1,b,\r\n"
        );
        let jobs = parse_trace(&t).expect("parses");
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].team, "team, one");
        assert_eq!(jobs[0].gpu_model, Some(GpuModel::new("A100")));
        assert_eq!(jobs[1].line, 4, "the blank line still counts");
        let bad = format!("{H}\r\n1,2,1,1,a\r\n\"x\",2,1,1,a\r\n");
        let e = parse_trace(&bad).expect_err("bad submit").to_string();
        assert!(e.starts_with("line 3: column submit_s"), "{e}");
    }

    #[test]
    fn bad_rows_are_reported_with_line_numbers() {
        let cases: &[(&str, &str)] = &[
            ("", "line 1: missing header"),
            (
                "submit_s,duration_s,gpus,workers",
                "line 1: missing column \"team\"",
            ),
            (
                "submit_s,duration_s,gpus,workers,team,color",
                "line 1: unknown column \"color\"",
            ),
            (
                "submit_s,duration_s,gpus,workers,team,team",
                "line 1: duplicate column",
            ),
            ("H\n1,2,1,1,a\n-5,2,1,1,a", "line 3: column submit_s"),
            ("H\nx,2,1,1,a", "line 2: column submit_s"),
            (
                "H\n1,0,1,1,a",
                "line 2: column duration_s: 0 must be at least 1",
            ),
            ("H\n1,2.5,1,1,a", "line 2: column duration_s"),
            ("H\n1,2,0,1,a", "line 2: column gpus"),
            ("H\n1,2,abc,1,a", "line 2: column gpus"),
            ("H\n1,2,NaN,1,a", "line 2: column gpus"),
            ("H\n1,2,1,0,a", "line 2: column workers"),
            ("H\n1,2,0.5,2,a", "line 2: column workers"),
            ("H\n1,2,2,3,a", "line 2: column workers"),
            ("H\n1,2,1,1", "line 2: column *: expected 5 fields, found 4"),
            ("H\n\n1,2,1,1,a,b", "line 3: column *"),
            ("H,priority\n1,2,1,1,a,high", "line 2: column priority"),
            (
                "H,checkpoint_s\n1,2,1,1,a,-1",
                "line 2: column checkpoint_s",
            ),
            ("H\n", "trace has no jobs"),
        ];
        for (text, want) in cases {
            let text = text.replacen('H', H, 1);
            let e = parse_trace(&text).expect_err(want).to_string();
            assert!(e.contains(want), "{text:?}: {e} lacks {want}");
        }
    }
}
