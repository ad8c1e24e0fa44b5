//! Every lock service is registered completely in each layer that keeps facts about it
//! (the list is in `src/strategy/service.rs`): a strategy that locks on it, a backend file,
//! URL schemes that lead back to it, local topologies that run it and that its strategies get
//! by default, and the matrix's facts for each of those topologies — so that a service added to
//! [`LockService`] without one of them fails here, not in a matrix run.

use std::path::Path;

use lockbench::matrix::service;
use lockbench::matrix::{FaultClass, MatrixWorkload};
use lockbench::strategy::{LockService, StrategyKind};
use lockbench::topology::pairing::url_service;
use lockbench::topology::TopologyKind;
use strum::VariantArray;

#[test]
fn every_service_is_registered_in_every_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for service in LockService::ALL {
        let name = service.name();
        let spec = service.spec();
        // strategy: a strategy the matrix runs, a backend file, URL schemes.
        let strategies: Vec<StrategyKind> = StrategyKind::all()
            .iter()
            .copied()
            .filter(|s| s.service() == service)
            .collect();
        assert!(!strategies.is_empty(), "{name}: no strategy locks on it");
        let backend = root.join("src/strategy").join(spec.backend_file);
        assert!(
            backend.is_file(),
            "{name}: {} is missing",
            backend.display()
        );
        assert!(!spec.url_schemes.is_empty(), "{name}: no URL scheme");
        for scheme in spec.url_schemes {
            assert_eq!(
                url_service(&format!("{scheme}://127.0.0.1:1")),
                service,
                "{name}: {scheme}://"
            );
        }
        // topology: local topologies that run it; each strategy's default is one of them and
        // serves it.
        let matrix = service::of(service);
        assert_eq!(matrix.service, service);
        let local: Vec<TopologyKind> = TopologyKind::VARIANTS
            .iter()
            .copied()
            .filter(|t| t.service() == Some(service))
            .collect();
        assert!(!local.is_empty(), "{name}: no local topology runs it");
        assert_eq!(
            matrix.topologies, local,
            "{name}: the matrix registration lists other topologies than run it"
        );
        for &s in &strategies {
            let home = TopologyKind::default_for(s);
            assert!(local.contains(&home), "{s}: default topology {home}");
            home.check_serves(s).unwrap();
            home.check_shape(s).unwrap();
        }
        // matrix: facts for each topology, and words for every fault class on it.
        let w = MatrixWorkload::standard();
        for &t in &local {
            let facts = service::topology(t);
            assert!(facts.servers >= 1, "{t}: servers");
            assert!(
                !facts.lock_nodes_words.is_empty(),
                "{t}: lock nodes in words"
            );
            for class in FaultClass::ALL {
                let words = class.describe(t, &w);
                assert!(
                    words.contains("episode"),
                    "{t} × {class}: no episodes in {words:?}"
                );
            }
        }
    }
}

#[test]
fn every_topology_but_external_belongs_to_one_service() {
    for &t in TopologyKind::VARIANTS {
        match t.service() {
            None => assert_eq!(t, TopologyKind::External),
            Some(s) => assert!(service::of(s).topologies.contains(&t), "{t}"),
        }
    }
}
