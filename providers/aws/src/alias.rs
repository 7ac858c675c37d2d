//! AMI aliases (`al2023@latest`, `al2023@v20250116`, `bottlerocket@latest`,
//! `bottlerocket@v1.30.0`): the NVIDIA variant of the image family for the
//! cluster's Kubernetes version, read from the public SSM parameters AWS
//! publishes, one per architecture. The parameter paths are the ones
//! Karpenter's AWS provider reads (`pkg/providers/amifamily/al2023.go`,
//! `bottlerocket.go` in aws/karpenter-provider-aws): Bottlerocket versions
//! drop their leading `v` in the path.

use muster_crds::nodeclass::ImageFamily;
use muster_provider_api::{ProviderError, ResolvedImage};

use crate::client::failure;
use crate::errors::classify;

/// The architectures an alias resolves for.
pub const ARCHITECTURES: [&str; 2] = ["x86_64", "arm64"];

/// An alias, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// Image family.
    pub family: ImageFamily,
    /// `latest` or a pinned version such as `v20250116`.
    pub version: String,
}

/// Reads `family@version`; `None` for a family muster does not know.
pub fn parse(alias: &str) -> Option<Alias> {
    let (family, version) = alias.split_once('@')?;
    let family = match family {
        "al2023" => ImageFamily::Al2023,
        "bottlerocket" => ImageFamily::Bottlerocket,
        _ => return None,
    };
    if version.is_empty() {
        return None;
    }
    Some(Alias {
        family,
        version: version.to_string(),
    })
}

/// The SSM parameter holding the AMI id of the NVIDIA variant for one
/// architecture and Kubernetes version (`major.minor`).
pub fn parameter(alias: &Alias, arch: &str, k8s: &str) -> String {
    let v = &alias.version;
    match alias.family {
        ImageFamily::Al2023 => {
            let name = if v == "latest" {
                "recommended".to_string()
            } else {
                format!("amazon-eks-node-al2023-{arch}-nvidia-{k8s}-{v}")
            };
            format!(
                "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/nvidia/{name}/image_id"
            )
        }
        ImageFamily::Bottlerocket => {
            let v = v.trim_start_matches('v');
            format!("/aws/service/bottlerocket/aws-k8s-{k8s}-nvidia/{arch}/{v}/image_id")
        }
    }
}

/// The images of an alias: one per architecture whose parameter exists.
/// None at all is `NotFound` naming the alias and the parameters read.
pub async fn resolve(
    ssm: &aws_sdk_ssm::Client,
    alias: &Alias,
    k8s: &str,
    text: &str,
) -> Result<Vec<ResolvedImage>, ProviderError> {
    let mut out = Vec::new();
    let mut tried = Vec::new();
    for arch in ARCHITECTURES {
        let name = parameter(alias, arch, k8s);
        match ssm.get_parameter().name(&name).send().await {
            Ok(resp) => {
                if let Some(id) = resp.parameter().and_then(|p| p.value()) {
                    out.push(ResolvedImage {
                        id: id.to_string(),
                        name: Some(name),
                        architecture: Some(arch.to_string()),
                    });
                }
            }
            Err(e) => match classify(&failure(&e), None) {
                ProviderError::NotFound { .. } => tried.push(name),
                other => return Err(other),
            },
        }
    }
    if out.is_empty() {
        return Err(ProviderError::NotFound {
            what: format!(
                "spec.aws.amiSelectorTerms alias {text} for Kubernetes {k8s} (SSM parameters {})",
                tried.join(", ")
            ),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_read_and_name_the_parameters_karpenter_reads() {
        let latest = parse("al2023@latest").expect("al2023");
        assert_eq!(
            parameter(&latest, "x86_64", "1.31"),
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
        );
        let pinned = parse("al2023@v20250116").expect("pinned");
        assert_eq!(
            parameter(&pinned, "arm64", "1.31"),
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/nvidia/\
             amazon-eks-node-al2023-arm64-nvidia-1.31-v20250116/image_id"
        );
        let br = parse("bottlerocket@v1.30.0").expect("bottlerocket");
        assert_eq!(br.family, ImageFamily::Bottlerocket);
        assert_eq!(
            parameter(&br, "x86_64", "1.31"),
            "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/1.30.0/image_id"
        );
        assert_eq!(
            parameter(
                &parse("bottlerocket@latest").expect("latest"),
                "arm64",
                "1.30"
            ),
            "/aws/service/bottlerocket/aws-k8s-1.30-nvidia/arm64/latest/image_id"
        );
        assert_eq!(parse("al2@latest"), None);
        assert_eq!(parse("al2023@"), None);
        assert_eq!(parse("al2023"), None);
    }
}
