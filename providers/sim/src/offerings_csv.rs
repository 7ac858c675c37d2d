//! Loads an offerings catalog in the CSV format of the project's data files:
//! `provider,region,instance_type,gpu_model,gpu_count,gpu_memory_gib,vcpu,memory_gib,on_demand_usd_h,spot_usd_h[,source]`.
//!
//! Each row becomes one offering per zone (three per region, see
//! [`crate::catalog::zones_of`]) and capacity type: on-demand always, spot
//! only where `spot_usd_h` is given (an unknown spot price means no spot
//! offering, never a zero price). Bad rows are errors naming the line.

use std::collections::BTreeSet;

use muster_planner::{CapacityType, GpuModel, Offering, Price, Provider};

use crate::catalog::{allocatable, offering_labels, typical_boot_secs, zones_of};

/// A catalog that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferingsError {
    /// The header lacks a required column or has an unknown one.
    #[error("line 1: {0}")]
    Header(String),
    /// A row is malformed.
    #[error("line {line}: column {column}: {message}")]
    Row {
        /// 1-based line number.
        line: usize,
        /// Column name.
        column: String,
        /// What is wrong.
        message: String,
    },
    /// No rows at all (after region filtering).
    #[error("{0}")]
    Empty(String),
}

const REQUIRED: [&str; 10] = [
    "provider",
    "region",
    "instance_type",
    "gpu_model",
    "gpu_count",
    "gpu_memory_gib",
    "vcpu",
    "memory_gib",
    "on_demand_usd_h",
    "spot_usd_h",
];

/// Which regions to keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RegionFilter {
    /// One region per provider: `us-east-1` for AWS and `us-central1` for GCP
    /// when present, else the provider's first region in the file. A cluster
    /// lives in one region.
    #[default]
    OnePerProvider,
    /// Exactly these regions.
    Only(Vec<String>),
}

/// Parses the CSV text (quoted fields, a byte-order mark and CRLF line ends
/// are read as spreadsheets write them); a free-text `source` column, when
/// last, may also hold unquoted commas.
pub fn parse_offerings(
    text: &str,
    regions: &RegionFilter,
) -> Result<Vec<Offering>, OfferingsError> {
    let mut records = crate::csv_rows::records(text);
    let header = match records.next() {
        None => return Err(OfferingsError::Empty("offerings file is empty".into())),
        Some(Err(bad)) => return Err(OfferingsError::Header(bad.message)),
        Some(Ok(h)) => h,
    };
    let cols: Vec<String> = header.fields;
    for want in REQUIRED {
        if !cols.iter().any(|c| c == want) {
            return Err(OfferingsError::Header(format!(
                "missing column {want:?} (expected {})",
                REQUIRED.join(",")
            )));
        }
    }
    for c in &cols {
        if !REQUIRED.contains(&c.as_str()) && c != "source" {
            return Err(OfferingsError::Header(format!("unknown column {c:?}")));
        }
    }
    let source_last = cols.last().is_some_and(|c| c == "source");
    let idx = |name: &str| cols.iter().position(|c| c == name).unwrap_or(0);
    let mut rows = Vec::new();
    for rec in records {
        let rec = rec.map_err(|bad| OfferingsError::Row {
            line: bad.line,
            column: "*".into(),
            message: bad.message,
        })?;
        let line_no = rec.line;
        let mut fields: Vec<&str> = rec.fields.iter().map(String::as_str).collect();
        // An unquoted free-text `source` with commas spills into extra fields.
        if source_last && fields.len() > cols.len() {
            fields.truncate(cols.len());
        }
        if fields.len() != cols.len() {
            return Err(OfferingsError::Row {
                line: line_no,
                column: "*".into(),
                message: format!("expected {} fields, found {}", cols.len(), fields.len()),
            });
        }
        let get = |name: &str| fields[idx(name)].trim();
        let err = |column: &str, message: String| OfferingsError::Row {
            line: line_no,
            column: column.into(),
            message,
        };
        let provider = match get("provider").to_ascii_lowercase().as_str() {
            "aws" => Provider::Aws,
            "gcp" => Provider::Gcp,
            "sim" => Provider::Sim,
            other => {
                return Err(err(
                    "provider",
                    format!("unknown provider {other:?} (aws, gcp, sim)"),
                ));
            }
        };
        let text_field = |name: &str| -> Result<String, OfferingsError> {
            let v = get(name);
            if v.is_empty() {
                Err(err(name, "must not be empty".into()))
            } else {
                Ok(v.to_string())
            }
        };
        let region = text_field("region")?;
        let instance_type = text_field("instance_type")?;
        let gpu_model = text_field("gpu_model")?;
        let number = |name: &str| -> Result<f64, OfferingsError> {
            let v = get(name);
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| err(name, format!("{v:?} is not a non-negative number")))
        };
        let whole = |name: &str| -> Result<u32, OfferingsError> {
            let v = get(name);
            v.parse::<u32>()
                .map_err(|_| err(name, format!("{v:?} is not a whole number")))
        };
        let gpu_count = whole("gpu_count")?;
        if gpu_count == 0 {
            return Err(err("gpu_count", "must be at least 1".into()));
        }
        let gpu_memory_gib = number("gpu_memory_gib")?;
        let vcpu = whole("vcpu")?;
        let memory_gib = number("memory_gib")?;
        let od = number("on_demand_usd_h")?;
        let spot = match get("spot_usd_h") {
            "" => None,
            _ => Some(number("spot_usd_h")?),
        };
        rows.push(Row {
            provider,
            region,
            instance_type,
            gpu_model,
            gpu_count,
            gpu_memory_gib,
            vcpu,
            memory_gib,
            od,
            spot,
        });
    }
    let keep: BTreeSet<(Provider, String)> = match regions {
        RegionFilter::Only(list) => rows
            .iter()
            .filter(|r| list.contains(&r.region))
            .map(|r| (r.provider, r.region.clone()))
            .collect(),
        RegionFilter::OnePerProvider => {
            let mut chosen = BTreeSet::new();
            let providers: BTreeSet<Provider> = rows.iter().map(|r| r.provider).collect();
            for p in providers {
                let preferred = match p {
                    Provider::Aws => "us-east-1",
                    Provider::Gcp => "us-central1",
                    Provider::Sim => "",
                };
                let region = rows
                    .iter()
                    .find(|r| r.provider == p && r.region == preferred)
                    .or_else(|| rows.iter().find(|r| r.provider == p))
                    .map(|r| r.region.clone());
                if let Some(region) = region {
                    chosen.insert((p, region));
                }
            }
            chosen
        }
    };
    let mut out = Vec::new();
    for r in rows
        .iter()
        .filter(|r| keep.contains(&(r.provider, r.region.clone())))
    {
        for zone in zones_of(r.provider, &r.region) {
            let mut prices = vec![(CapacityType::OnDemand, r.od)];
            if let Some(s) = r.spot {
                prices.push((CapacityType::Spot, s));
            }
            for (capacity_type, usd) in prices {
                out.push(Offering {
                    provider: r.provider,
                    node_class: String::new(),
                    region: r.region.clone(),
                    zone: zone.clone(),
                    instance_type: r.instance_type.clone(),
                    capacity_type,
                    price: Price::from_usd(usd),
                    gpu_model: Some(GpuModel::new(&r.gpu_model)),
                    gpu_count: r.gpu_count,
                    gpu_memory_mib: (r.gpu_memory_gib * 1024.0).round() as u64,
                    resources: allocatable(r.vcpu, r.memory_gib, r.gpu_count),
                    available: true,
                    unavailable_until: None,
                    interruption_rate_per_hour: 0.0,
                    placement_groups: true,
                    boot_secs: typical_boot_secs(&r.instance_type),
                    reservation: None,
                    flex_start: None,
                    labels: offering_labels(&r.instance_type),
                });
            }
        }
    }
    if out.is_empty() {
        return Err(OfferingsError::Empty(match regions {
            RegionFilter::Only(list) => format!("no offerings in regions {}", list.join(", ")),
            RegionFilter::OnePerProvider => "offerings file has no rows".into(),
        }));
    }
    Ok(out)
}

struct Row {
    provider: Provider,
    region: String,
    instance_type: String,
    gpu_model: String,
    gpu_count: u32,
    gpu_memory_gib: f64,
    vcpu: u32,
    memory_gib: f64,
    od: f64,
    spot: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "provider,region,instance_type,gpu_model,gpu_count,gpu_memory_gib,vcpu,memory_gib,on_demand_usd_h,spot_usd_h,source";

    #[test]
    fn parses_rows_and_spot() {
        let text = format!(
            "{HEADER}\naws,us-east-1,g5.xlarge,A10G,1,22.35,4,16.0,1.006,0.4028,a, b, c\naws,us-east-1,g4dn.12xlarge,T4,4,16,48,192,3.912,,x\naws,eu-west-1,g5.xlarge,A10G,1,22.35,4,16,1.1,,x\n"
        );
        let o = parse_offerings(&text, &RegionFilter::default()).expect("parses");
        // g5.xlarge: 3 zones × 2; g4dn.12xlarge: 3 zones × on-demand; eu-west-1 dropped.
        assert_eq!(o.len(), 9);
        assert!(o.iter().all(|x| x.region == "us-east-1"));
        assert_eq!(
            o.iter()
                .filter(|x| x.capacity_type == CapacityType::Spot)
                .count(),
            3
        );
        let eu = parse_offerings(&text, &RegionFilter::Only(vec!["eu-west-1".into()])).expect("eu");
        assert_eq!(eu.len(), 3);
    }

    #[test]
    fn quoted_source_bom_and_crlf() {
        let text = format!(
            "\u{feff}{HEADER}\r\n\"aws\",us-east-1,g5.xlarge,A10G,1,22.35,4,16.0,1.006,0.4028,\"spot=median, of 5 zones; \"\"dated\"\"\"\r\n\r\naws,us-east-1,g5.2xlarge,A10G,1,22.35,8,32,x,,y\r\n"
        );
        let e = parse_offerings(&text, &RegionFilter::default())
            .expect_err("bad price on line 4")
            .to_string();
        assert!(e.starts_with("line 4: column on_demand_usd_h"), "{e}");
        let good = text.replace(",x,,y", ",1.212,,y");
        let o = parse_offerings(&good, &RegionFilter::default()).expect("parses");
        assert_eq!(
            o.len(),
            9,
            "g5.xlarge spot + on-demand and g5.2xlarge on-demand, 3 zones"
        );
    }

    #[test]
    fn bad_rows_name_the_line() {
        let cases = [
            (
                format!("{HEADER}\naws,us-east-1,g5.xlarge,A10G,one,22,4,16,1,,x"),
                "line 2: column gpu_count",
            ),
            (
                format!("{HEADER}\n\naws,us-east-1,g5.xlarge,A10G,1,22,4,16,-1,,x"),
                "line 3: column on_demand_usd_h",
            ),
            (
                format!("{HEADER}\nazure,r,t,m,1,1,1,1,1,,x"),
                "line 2: column provider",
            ),
            (
                format!("{HEADER}\naws,us-east-1,g5.xlarge"),
                "line 2: column *: expected 11",
            ),
            ("provider,region\n".to_string(), "line 1: missing column"),
            (format!("{HEADER},extra\n"), "line 1: unknown column"),
            (
                format!("{HEADER}\naws,us-east-1,g5.xlarge,A10G,1,22,4,16,1,abc,x"),
                "line 2: column spot_usd_h",
            ),
        ];
        for (text, want) in cases {
            let e = parse_offerings(&text, &RegionFilter::default())
                .expect_err(want)
                .to_string();
            assert!(e.contains(want), "{e} lacks {want}");
        }
    }
}
