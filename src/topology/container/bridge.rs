//! The `single` and `five` layout: each node a container on the run's network, reached by
//! clients through its proxy in the Toxiproxy container (the proxies are the caller's).

use super::node::ContainerNode;
use super::run::{open_run, wait_api, DockerRun};
use super::start::start_container;
use super::{PROXY_PORT_BASE, TOXIPROXY_API_PORT};
use crate::topology::docker::DockerOptions;
use crate::topology::ports::pick_free_port;
use crate::topology::{Persistence, TopologyError};

/// Starts a docker run: checks both images, creates the network, starts `nodes` Redis
/// containers (`n1`..) and the Toxiproxy container concurrently, and waits until every node
/// answers PING and the Toxiproxy API answers.
///
/// # Errors
/// [`TopologyError::DockerUnavailable`], [`TopologyError::DockerImageMissing`],
/// [`TopologyError::Docker`], [`TopologyError::NodeStart`]. On error nothing of the run is
/// left (containers and network removed).
pub async fn start_run(
    nodes: usize,
    persistence: Persistence,
    options: &DockerOptions,
) -> Result<(Vec<ContainerNode>, DockerRun), TopologyError> {
    let mut run = open_run(options).await?;
    let docker = run.docker.clone();
    let started = async {
        run.api_port = pick_free_port()?;
        let mut ports = vec![(run.api_port, TOXIPROXY_API_PORT)];
        for i in 1..=nodes {
            let inner = PROXY_PORT_BASE + i as u16;
            let host = pick_free_port()?;
            run.proxy_ports.push((format!("n{i}"), inner, host));
            ports.push((host, inner));
        }
        let cmd = vec![
            "--host=0.0.0.0".to_string(),
            format!("--port={TOXIPROXY_API_PORT}"),
        ];
        let proxy_name = options.toxiproxy_container_name();
        let proxy = start_container(&options.toxiproxy_image, &proxy_name, options, cmd, ports);
        let node_starts =
            (1..=nodes).map(|i| {
                let docker = docker.clone();
                async move {
                    ContainerNode::start(&docker, &format!("n{i}"), persistence, options).await
                }
            });
        let (proxy, started_nodes) = futures::join!(proxy, futures::future::join_all(node_starts));
        Ok::<_, TopologyError>((proxy, started_nodes))
    }
    .await;
    let (proxy, started_nodes) = match started {
        Ok(x) => x,
        Err(e) => {
            run.remove().await;
            return Err(e);
        }
    };
    let mut ok_nodes = Vec::new();
    let mut first_error = None;
    for n in started_nodes {
        match n {
            Ok(node) => ok_nodes.push(node),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match proxy {
        Ok((c, used)) => {
            // The host ports actually bound (re-picked if one was taken meanwhile).
            run.api_port = used[0].0;
            for ((_, _, host), (bound, _)) in run.proxy_ports.iter_mut().zip(&used[1..]) {
                *host = *bound;
            }
            run.toxiproxy = Some(c);
        }
        Err(e) => {
            first_error.get_or_insert(e);
        }
    }
    if first_error.is_none() {
        if let Err(e) = wait_api(&run, options.start_timeout).await {
            first_error = Some(e);
        }
    }
    if let Some(e) = first_error {
        for n in &mut ok_nodes {
            n.remove().await;
        }
        run.remove().await;
        return Err(e);
    }
    Ok((ok_nodes, run))
}
