//! A moto server for tests (`tests/moto_server.py`, behind the
//! `test-support` feature): started on 127.0.0.1 by the test, stopped when
//! dropped, with its control endpoint for injecting capacity errors,
//! throttling and other errors, and counting `RunInstances` calls; capacity
//! reservations (On-Demand and Capacity Blocks) and instance topology, which
//! the launcher adds to moto.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use aws_sdk_ec2::types::Tag;
use serde_json::json;

use crate::client::{AwsOptions, Clients, connect};

/// A running moto server.
pub struct Moto {
    child: Child,
    _stdin: Option<ChildStdin>,
    /// `http://127.0.0.1:PORT` of the AWS APIs.
    pub endpoint: String,
    control: String,
}

impl Moto {
    /// Starts a fresh server (python3 with `moto[server]` installed).
    pub fn start() -> Moto {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/moto_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs the moto launcher");
        let stdout = child.stdout.take().expect("stdout");
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let (mut moto, mut control) = (None, None);
        while moto.is_none() || control.is_none() {
            line.clear();
            let n = reader.read_line(&mut line).expect("launcher output");
            assert!(
                n > 0,
                "the moto launcher exited (is moto[server] installed?)"
            );
            for part in line.split_whitespace() {
                if let Some(p) = part.strip_prefix("moto=") {
                    moto = Some(p.to_string());
                }
                if let Some(p) = part.strip_prefix("control=") {
                    control = Some(p.to_string());
                }
            }
        }
        let stdin = child.stdin.take();
        Moto {
            child,
            _stdin: stdin,
            endpoint: format!("http://127.0.0.1:{}", moto.unwrap_or_default()),
            control: format!("127.0.0.1:{}", control.unwrap_or_default()),
        }
    }

    /// Options pointing a provider at this server (static test credentials,
    /// quick retries).
    pub fn options(&self) -> AwsOptions {
        AwsOptions {
            endpoint: Some(self.endpoint.clone()),
            static_credentials: Some(("testing".into(), "testing".into())),
            initial_backoff: Duration::from_millis(20),
            ..AwsOptions::default()
        }
    }

    /// Clients for `us-east-1` on this server.
    pub async fn clients(&self) -> Clients {
        connect("us-east-1", &self.options()).await
    }

    /// Tags subnets of us-east-1a and us-east-1b and a new security group with
    /// `team=gpu`; returns a NodeClass spec selecting them and an AMI by id.
    pub async fn node_class_spec(&self) -> serde_json::Value {
        let c = self.clients().await;
        let subnets = c.ec2.describe_subnets().send().await.expect("subnets");
        let ids: Vec<String> = subnets
            .subnets()
            .iter()
            .filter(|s| matches!(s.availability_zone(), Some("us-east-1a" | "us-east-1b")))
            .filter_map(|s| s.subnet_id().map(String::from))
            .collect();
        assert_eq!(ids.len(), 2, "moto's default VPC has one subnet per zone");
        let team = Tag::builder().key("team").value("gpu").build();
        c.ec2
            .create_tags()
            .set_resources(Some(ids))
            .tags(team.clone())
            .send()
            .await
            .expect("tag subnets");
        let sg = c
            .ec2
            .create_security_group()
            .group_name("gpu-nodes")
            .description("GPU nodes")
            .send()
            .await
            .expect("security group");
        c.ec2
            .create_tags()
            .resources(sg.group_id().expect("group id"))
            .tags(team)
            .send()
            .await
            .expect("tag security group");
        let images = c
            .ec2
            .describe_images()
            .owners("amazon")
            .send()
            .await
            .expect("images");
        let ami = images
            .images()
            .iter()
            .find(|i| i.architecture().map(|a| a.as_str()) == Some("x86_64"))
            .and_then(|i| i.image_id())
            .expect("an x86_64 AMI")
            .to_string();
        json!({"aws": {
            "region": "us-east-1",
            "subnetSelectorTerms": [{"tags": {"team": "gpu"}}],
            "securityGroupSelectorTerms": [{"tags": {"team": "gpu"}}],
            "amiSelectorTerms": [{"id": ami}],
            "instanceProfile": "muster-node",
            "tags": {"cost-center": "42"}
        }})
    }

    /// Creates the EKS cluster `name` on Kubernetes `version` in the default
    /// VPC's subnets; returns its API endpoint.
    pub async fn eks_cluster(&self, name: &str, version: &str) -> String {
        let c = self.clients().await;
        let subnets = c.ec2.describe_subnets().send().await.expect("subnets");
        let ids: Vec<String> = subnets
            .subnets()
            .iter()
            .filter_map(|s| s.subnet_id().map(String::from))
            .collect();
        let out = c
            .eks
            .create_cluster()
            .name(name)
            .version(version)
            .role_arn("arn:aws:iam::123456789012:role/eks-cluster")
            .resources_vpc_config(
                aws_sdk_eks::types::VpcConfigRequest::builder()
                    .set_subnet_ids(Some(ids))
                    .build(),
            )
            .send()
            .await
            .expect("create cluster");
        out.cluster()
            .and_then(|c| c.endpoint())
            .expect("endpoint")
            .to_string()
    }

    /// A request to the control endpoint; returns the body.
    pub fn control(&self, method: &str, path: &str) -> String {
        let mut s = TcpStream::connect(&self.control).expect("control endpoint");
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.control
        )
        .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string()
    }

    /// Every AWS call since the last reset, as the launcher recorded it (see
    /// its docstring): service, action, region, account, parameters.
    pub fn log(&self) -> Vec<serde_json::Value> {
        serde_json::from_str(&self.control("GET", "/log")).unwrap_or_default()
    }

    /// Clears injections, counts and the call log.
    pub fn reset(&self) {
        self.control("POST", "/reset");
    }

    /// Publishes a public SSM parameter (`/aws/service/...`), as AWS does.
    pub fn public_parameter(&self, name: &str, value: &str) {
        self.control(
            "POST",
            &format!(
                "/public-parameter?name={}&value={}",
                query(name),
                query(value)
            ),
        );
    }

    /// `RunInstances` requests so far, retries included.
    pub fn run_instances_calls(&self) -> u64 {
        self.calls("runInstances")
    }

    /// The user data of the instance with `provider_id`, decoded
    /// (`DescribeInstanceAttribute`); `None` when it has none.
    pub async fn user_data(&self, provider_id: &str) -> Option<String> {
        use base64::Engine;
        let id = provider_id.rsplit('/').next()?;
        let attr = self
            .clients()
            .await
            .ec2
            .describe_instance_attribute()
            .instance_id(id)
            .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
            .send()
            .await
            .ok()?;
        let b64 = attr.user_data()?.value()?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        String::from_utf8(bytes).ok()
    }

    /// Seeds a Capacity Block for ML of `count` `instance_type` in `zone`,
    /// from `start` to `end` (epoch seconds), with `tags`; returns its id.
    pub fn capacity_block(
        &self,
        instance_type: &str,
        zone: &str,
        count: u32,
        (start, end): (i64, i64),
        tags: &[(&str, &str)],
    ) -> String {
        let mut path = format!(
            "/capacity-block?type={}&zone={}&count={count}&start={start}&end={end}",
            query(instance_type),
            query(zone)
        );
        for (k, v) in tags {
            path.push_str(&format!("&tag={}", query(&format!("{k}={v}"))));
        }
        let body = self.control("POST", &path);
        serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["id"].as_str().map(String::from))
            .expect("the launcher names the Capacity Block")
    }

    /// Creates an On-Demand Capacity Reservation (`CreateCapacityReservation`,
    /// targeted, Linux) of `count` `instance_type` in `zone`, tagged with
    /// `tags`; returns its id.
    pub async fn capacity_reservation(
        &self,
        instance_type: &str,
        zone: &str,
        count: i32,
        tags: &[(&str, &str)],
    ) -> String {
        use aws_sdk_ec2::types::{
            CapacityReservationInstancePlatform, InstanceMatchCriteria, ResourceType,
            TagSpecification,
        };
        // EC2 refuses a tag specification without tags
        let spec = (!tags.is_empty()).then(|| {
            TagSpecification::builder()
                .resource_type(ResourceType::CapacityReservation)
                .set_tags(Some(
                    tags.iter()
                        .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
                        .collect(),
                ))
                .build()
        });
        self.clients()
            .await
            .ec2
            .create_capacity_reservation()
            .instance_type(instance_type)
            .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
            .availability_zone(zone)
            .instance_count(count)
            .instance_match_criteria(InstanceMatchCriteria::Targeted)
            .set_tag_specifications(spec.map(|s| vec![s]))
            .send()
            .await
            .expect("create capacity reservation")
            .capacity_reservation()
            .and_then(|r| r.capacity_reservation_id())
            .expect("reservation id")
            .to_string()
    }

    /// `AvailableInstanceCount` of reservation `id`, as EC2 reports it.
    pub async fn available(&self, id: &str) -> Option<i32> {
        self.clients()
            .await
            .ec2
            .describe_capacity_reservations()
            .capacity_reservation_ids(id)
            .send()
            .await
            .ok()?
            .capacity_reservations()
            .first()?
            .available_instance_count()
    }

    /// Makes `DescribeCapacityReservations` and `DescribeInstanceTopology`
    /// answer at most `n` items per page (0: all), so that callers must
    /// follow `NextToken`.
    pub fn page_size(&self, n: u32) {
        self.control("POST", &format!("/page-size?n={n}"));
    }

    /// `TerminateInstances` requests so far, retries included.
    pub fn terminate_instances_calls(&self) -> u64 {
        self.calls("terminateInstances")
    }

    fn calls(&self, what: &str) -> u64 {
        let body = self.control("GET", "/calls");
        serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v[what].as_u64())
            .unwrap_or(0)
    }
}

/// Percent-encodes a query value.
fn query(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
