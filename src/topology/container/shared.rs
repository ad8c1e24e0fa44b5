//! The start shared by the `sentinel` and `cluster` layouts: the Toxiproxy container owns the
//! run's network namespace and publishes its ports; the nodes start inside that namespace.

use testcontainers::bollard::Docker;

use super::node::ContainerNode;
use super::run::{wait_api, DockerRun, RunProxy};
use super::start::{start_container_once, Net};
use super::{docker_err, TOXIPROXY_API_PORT};
use crate::topology::docker::DockerOptions;
use crate::topology::{Persistence, TopologyError};

/// One proxy a shared-namespace run creates: (node, proxy name, listen port, upstream port),
/// both ports on 127.0.0.1 inside the namespace. A client proxy is named after its node.
pub(super) type WantedProxy = (String, String, u16, u16);

/// Starts the Toxiproxy container of a run whose containers share its network namespace
/// (`sentinel`, `cluster`) and creates the run's proxies in it. Ports are picked free
/// (`pick`), then bound by the engine (`published`): another process can take one in
/// between, so a clash picks them all again (3 tries). Inside the container's namespace a
/// port can be taken too (Docker's embedded DNS resolver listens on a random port there): a
/// proxy that cannot listen ("Address already in use") starts the container over with fresh
/// ports (3 tries).
pub(super) async fn start_shared_namespace<P>(
    run: &mut DockerRun,
    pick: impl Fn() -> Result<P, TopologyError>,
    published: impl Fn(&P) -> Vec<(u16, u16)>,
    proxies: impl Fn(&P) -> Vec<WantedProxy>,
) -> Result<P, TopologyError> {
    let options = run.options.clone();
    let proxy_name = options.toxiproxy_container_name();
    let cmd = vec![
        "--host=0.0.0.0".to_string(),
        format!("--port={TOXIPROXY_API_PORT}"),
    ];
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut tries = 0;
        let ports = loop {
            tries += 1;
            let ports = pick()?;
            let net = Net::Run(published(&ports));
            match start_container_once(
                &options.toxiproxy_image,
                &proxy_name,
                &options,
                cmd.clone(),
                net,
            )
            .await
            {
                Ok(c) => {
                    run.toxiproxy = Some(c);
                    run.api_port = published(&ports)[0].0;
                    break ports;
                }
                Err(e) if tries < 3 && e.to_string().contains("port is already allocated") => {}
                Err(e) => return Err(e),
            }
        };
        wait_api(run, options.start_timeout).await?;
        match create_run_proxies(run, proxies(&ports), &proxy_name).await {
            Ok(()) => return Ok(ports),
            Err(e) if attempts < 3 && e.to_string().contains("Address already in use") => {
                tracing::warn!("{e}; starting {proxy_name} again with other ports");
                run.remove_toxiproxy().await;
                run.links.clear();
                run.proxy_ports.clear();
            }
            Err(e) => return Err(e),
        }
    }
}

/// Creates `wanted` proxies in the run's Toxiproxy container, recording them in `run`.
async fn create_run_proxies(
    run: &mut DockerRun,
    wanted: Vec<WantedProxy>,
    proxy_name: &str,
) -> Result<(), TopologyError> {
    let api = crate::toxiproxy::ToxiproxyClient::new(&run.api_url())
        .map_err(|e| docker_err("toxiproxy API client", e))?;
    let local = |p: u16| format!("127.0.0.1:{p}");
    for (node, proxy, listen, upstream) in wanted {
        api.create_proxy(&proxy, &format!("0.0.0.0:{listen}"), &local(upstream))
            .await
            .map_err(|e| docker_err(format!("creating proxy {proxy} in {proxy_name}"), e))?;
        if proxy == node {
            run.proxy_ports.push((node.clone(), listen, listen));
        }
        run.links.push(RunProxy {
            node,
            proxy,
            listen: local(listen),
            upstream: local(upstream),
        });
    }
    Ok(())
}

/// Starts every (name, command, port) as a container in `owner`'s network namespace
/// ([`ContainerNode::start_shared`]), all at once. Returns them in order, or the first error
/// after removing the ones that started.
pub(super) async fn start_all_shared(
    docker: &Docker,
    starts: impl Iterator<Item = (String, Vec<String>, u16)>,
    owner: &str,
    persistence: Persistence,
    options: &DockerOptions,
) -> Result<Vec<ContainerNode>, TopologyError> {
    let starts = starts.map(|(name, cmd, port)| async move {
        ContainerNode::start_shared(docker, &name, cmd, port, owner, persistence, options).await
    });
    let mut started = Vec::new();
    let mut first_error = None;
    for result in futures::future::join_all(starts).await {
        match result {
            Ok(n) => started.push(n),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        None => Ok(started),
        Some(e) => {
            for n in &mut started {
                n.remove().await;
            }
            Err(e)
        }
    }
}
