//! Creating and starting one container of a run: on the run's network with ports published
//! on 127.0.0.1, or inside another container's network namespace.

use std::collections::HashMap;

use testcontainers::bollard::models::{HostConfig, PortBinding};
use testcontainers::core::{ContainerPort, ImageExt};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage};

use super::docker_err;
use crate::topology::docker::{self, split_image, DockerOptions, RUN_LABEL};
use crate::topology::ports::pick_free_port;
use crate::topology::TopologyError;

/// Binds every published port to 127.0.0.1 (testcontainers binds 0.0.0.0).
fn loopback_only(ports: Vec<(u16, u16)>) -> impl Fn(&mut HostConfig) + Send + Sync + 'static {
    move |hc: &mut HostConfig| {
        let bindings: HashMap<String, Option<Vec<PortBinding>>> = ports
            .iter()
            .map(|(host, inner)| {
                (
                    format!("{inner}/tcp"),
                    Some(vec![PortBinding {
                        host_ip: Some("127.0.0.1".into()),
                        host_port: Some(host.to_string()),
                    }]),
                )
            })
            .collect();
        hc.port_bindings = Some(bindings);
        hc.publish_all_ports = Some(false);
    }
}

/// Creates and starts one container; registers its name first for the last-resort cleanup.
///
/// `ports` maps host ports to container ports. Host ports are picked free just before, so
/// another process can take one in between ("port is already allocated"): then fresh host
/// ports are picked and the start is retried (3 tries). Returns the container and the host
/// ports it really got, in the order given.
pub(super) async fn start_container(
    image: &str,
    name: &str,
    options: &DockerOptions,
    cmd: Vec<String>,
    mut ports: Vec<(u16, u16)>,
) -> Result<(ContainerAsync<GenericImage>, Vec<(u16, u16)>), TopologyError> {
    let mut tries = 0;
    loop {
        tries += 1;
        let net = Net::Run(ports.clone());
        match start_container_once(image, name, options, cmd.clone(), net).await {
            Ok(c) => return Ok((c, ports)),
            Err(e) if tries < 3 && e.to_string().contains("port is already allocated") => {
                for (host, _) in &mut ports {
                    *host = pick_free_port()?;
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Where a container's network stack comes from.
pub(super) enum Net {
    /// Its own, on the run's network, with these (host, container) ports published on 127.0.0.1.
    Run(Vec<(u16, u16)>),
    /// The named container's (`network_mode: container:<name>`): same interfaces, same
    /// 127.0.0.1, same published ports; nothing published of its own.
    Shared(String),
}

/// `network_mode: container:<name>` and no port of its own (the engine refuses both together).
fn shared_with(container: String) -> impl Fn(&mut HostConfig) + Send + Sync + 'static {
    move |hc: &mut HostConfig| {
        hc.network_mode = Some(format!("container:{container}"));
        hc.port_bindings = None;
        hc.publish_all_ports = Some(false);
    }
}

pub(super) async fn start_container_once(
    image: &str,
    name: &str,
    options: &DockerOptions,
    cmd: Vec<String>,
    net: Net,
) -> Result<ContainerAsync<GenericImage>, TopologyError> {
    let (repo, tag) = split_image(image);
    let mut generic = GenericImage::new(repo, tag);
    if let Net::Run(ports) = &net {
        for (_, inner) in ports {
            generic = generic.with_exposed_port(ContainerPort::Tcp(*inner));
        }
    }
    let mut request = generic
        .with_cmd(cmd)
        .with_container_name(name)
        .with_label(RUN_LABEL, &options.run_tag)
        .with_startup_timeout(options.start_timeout);
    let request = match net {
        Net::Run(ports) => {
            request = request.with_network(options.network_name());
            for (host, inner) in &ports {
                request = request.with_mapped_port(*host, ContainerPort::Tcp(*inner));
            }
            request.with_host_config_modifier(loopback_only(ports))
        }
        // Not `with_network`: testcontainers would try to create a network named `container:…`.
        Net::Shared(owner) => request.with_host_config_modifier(shared_with(owner)),
    };
    docker::register_container(name);
    match request.start().await {
        Ok(c) => Ok(c),
        Err(e) => {
            let names = [name.to_string()];
            tokio::task::spawn_blocking(move || docker::remove_blocking(&names, &[]))
                .await
                .ok();
            Err(docker_err(
                format!("starting container {name} ({image})"),
                e,
            ))
        }
    }
}
