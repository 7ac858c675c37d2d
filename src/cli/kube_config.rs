//! The Kubernetes client configuration every cluster-reading subcommand
//! takes from the same flags: `--kube-url`, else `--kubeconfig`, else the
//! usual inference (in-cluster, then `~/.kube/config`).

use std::path::Path;

use super::CliError;

/// The client configuration the flags name, with a precise message naming
/// the flag that is wrong.
pub(crate) async fn from_flags(
    kube_url: Option<&str>,
    kubeconfig: Option<&Path>,
) -> Result<kube::Config, CliError> {
    muster::controller::install_crypto_provider();
    if let Some(url) = kube_url {
        let uri = url
            .parse()
            .map_err(|e| CliError::input(format!("--kube-url {url}: {e}")))?;
        return Ok(kube::Config::new(uri));
    }
    if let Some(path) = kubeconfig {
        let bad = |e: &dyn std::fmt::Display| {
            CliError::input(format!("--kubeconfig {}: {e}", path.display()))
        };
        let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| bad(&e))?;
        return kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| bad(&e));
    }
    kube::Config::infer()
        .await
        .map_err(|e| CliError::input(format!("no Kubernetes configuration: {e}")))
}

/// A client from the configuration.
pub(crate) fn client(config: kube::Config) -> Result<kube::Client, CliError> {
    kube::Client::try_from(config).map_err(|e| CliError::failed(format!("kube client: {e}")))
}
