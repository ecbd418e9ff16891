use std::path::Path;

use clap::CommandFactory;
use clap::error::ErrorKind;

use super::*;
use crate::runtime::feature_gates::Feature;

fn parse(flags: &[&str]) -> Args {
    let argv = std::iter::once("manager").chain(flags.iter().copied());
    match Args::try_parse_from(argv) {
        Ok(args) => args,
        Err(err) => panic!("flags {flags:?} rejected: {err}"),
    }
}

fn rejection(flags: &[&str]) -> clap::Error {
    let argv = std::iter::once("manager").chain(flags.iter().copied());
    match Args::try_parse_from(argv) {
        Ok(args) => panic!("flags {flags:?} accepted as {args:?}"),
        Err(err) => err,
    }
}

#[test]
fn clap_definition_is_consistent() {
    Args::command().debug_assert();
}

#[test]
fn defaults_are_capds() {
    let args = parse(&[]);
    assert_eq!(args.namespace, "");
    assert_eq!(args.watch_filter, "");
    assert!(!args.leader_elect);
    assert_eq!(args.leader_elect_lease_duration, Duration::from_secs(15));
    assert_eq!(args.leader_elect_renew_deadline, Duration::from_secs(10));
    assert_eq!(args.leader_elect_retry_period, Duration::from_secs(2));
    assert_eq!(args.health_addr, ":9440".parse().unwrap());
    assert_eq!(args.diagnostics_address, ":8443".parse().unwrap());
    assert!(!args.insecure_diagnostics);
    assert_eq!(args.tls_min_version, TlsMinVersion::Tls12);
    assert_eq!(args.sync_period, Duration::from_secs(600));
    assert_eq!(args.dockermachine_concurrency, 100);
    assert_eq!(args.dockercluster_concurrency, 50);
    assert_eq!(args.dockermachinetemplate_concurrency, 50);
    assert_eq!(args.dockermachinepool_concurrency, 50);
    // CAPD 1.14's per-kind flags of the Dev kinds.
    assert_eq!(args.devmachine_concurrency, 50);
    assert_eq!(args.devcluster_concurrency, 50);
    assert_eq!(args.devmachinetemplate_concurrency, 50);
    assert_eq!(args.devmachinepool_concurrency, 100);
    assert_eq!(args.kube_api_qps, 100.0);
    assert_eq!(args.kube_api_burst, 200);
    assert_eq!(args.clustercache_client_qps, 20.0);
    assert_eq!(args.clustercache_client_burst, 30);
    assert_eq!(args.feature_gates, FeatureGates::default());
    assert_eq!(args.webhook_port, 9443);
    assert_eq!(
        args.webhook_cert_dir,
        Path::new("/tmp/k8s-webhook-server/serving-certs/")
    );
    assert_eq!(args.webhook_cert_name, "tls.crt");
    assert_eq!(args.webhook_key_name, "tls.key");
    assert_eq!(args.v, 2);
    assert_eq!(args.logging_format, LogFormat::Text);
    assert_eq!(args.kubeconfig, None);
}

#[test]
fn ports_are_published_on_loopback_unless_asked_otherwise() {
    let expected = std::env::var("CAPD_PUBLISH_ADDRESS").unwrap_or_else(|_| "127.0.0.1".into());
    assert_eq!(parse(&[]).publish_address.to_string(), expected);
    let everywhere = parse(&["--publish-address=0.0.0.0"]).publish_address;
    assert!(everywhere.is_unspecified());
    assert_eq!(
        parse(&["--publish-address", "::1"])
            .publish_address
            .to_string(),
        "::1"
    );
    assert!(Args::try_parse_from(["manager", "--publish-address=localhost"]).is_err());
}

#[test]
fn docker_network_defaults_to_kind_unless_the_environment_says_otherwise() {
    let expected = std::env::var("CAPD_DOCKER_NETWORK").unwrap_or_else(|_| "kind".to_owned());
    assert_eq!(parse(&[]).docker_network, expected);
}

#[test]
fn every_flag_is_read() {
    let args = parse(&[
        "--namespace=team-a",
        "--watch-filter=mgmt-1",
        "--leader-elect",
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=1500ms",
        "--health-addr=127.0.0.1:19440",
        "--diagnostics-address=[::1]:18443",
        "--insecure-diagnostics=true",
        "--tls-min-version=VersionTLS13",
        "--sync-period=1h30m",
        "--dockermachine-concurrency=7",
        "--dockercluster-concurrency=8",
        "--dockermachinetemplate-concurrency=9",
        "--dockermachinepool-concurrency=11",
        "--devmachine-concurrency=13",
        "--devcluster-concurrency=14",
        "--devmachinetemplate-concurrency=15",
        "--devmachinepool-concurrency=16",
        "--kube-api-qps=12.5",
        "--kube-api-burst=25",
        "--clustercache-client-qps=3",
        "--clustercache-client-burst=4",
        "--feature-gates=MachinePool=false,ClusterTopology=true",
        "--webhook-port=10443",
        "--webhook-cert-dir=/certs",
        "--webhook-cert-name=serving.crt",
        "--webhook-key-name=serving.key",
        "--v=5",
        "--logging-format=json",
        "--docker-network=capd-test",
        "--kubeconfig=/home/me/.kube/mgmt",
    ]);
    assert_eq!(args.namespace, "team-a");
    assert_eq!(args.watch_filter, "mgmt-1");
    assert!(args.leader_elect);
    assert_eq!(args.leader_elect_lease_duration, Duration::from_secs(30));
    assert_eq!(args.leader_elect_renew_deadline, Duration::from_secs(20));
    assert_eq!(args.leader_elect_retry_period, Duration::from_millis(1500));
    assert_eq!(args.health_addr.to_string(), "127.0.0.1:19440");
    assert_eq!(args.diagnostics_address.to_string(), "[::1]:18443");
    assert!(args.insecure_diagnostics);
    assert_eq!(args.tls_min_version, TlsMinVersion::Tls13);
    assert_eq!(args.sync_period, Duration::from_secs(5400));
    assert_eq!(args.dockermachine_concurrency, 7);
    assert_eq!(args.dockercluster_concurrency, 8);
    assert_eq!(args.dockermachinetemplate_concurrency, 9);
    assert_eq!(args.dockermachinepool_concurrency, 11);
    assert_eq!(args.devmachine_concurrency, 13);
    assert_eq!(args.devcluster_concurrency, 14);
    assert_eq!(args.devmachinetemplate_concurrency, 15);
    assert_eq!(args.devmachinepool_concurrency, 16);
    assert_eq!(args.kube_api_qps, 12.5);
    assert_eq!(args.kube_api_burst, 25);
    assert_eq!(args.clustercache_client_qps, 3.0);
    assert_eq!(args.clustercache_client_burst, 4);
    assert!(!args.feature_gates.enabled(Feature::MachinePool));
    assert!(args.feature_gates.enabled(Feature::ClusterTopology));
    assert_eq!(args.webhook_port, 10443);
    assert_eq!(args.webhook_cert_dir, Path::new("/certs"));
    assert_eq!(args.webhook_cert_name, "serving.crt");
    assert_eq!(args.webhook_key_name, "serving.key");
    assert_eq!(args.v, 5);
    assert_eq!(args.logging_format, LogFormat::Json);
    assert_eq!(args.docker_network, "capd-test");
    assert_eq!(
        args.kubeconfig.as_deref(),
        Some(Path::new("/home/me/.kube/mgmt"))
    );
}

#[test]
fn booleans_take_the_go_forms() {
    assert!(parse(&["--leader-elect"]).leader_elect);
    assert!(parse(&["--leader-elect=true"]).leader_elect);
    assert!(!parse(&["--leader-elect=false"]).leader_elect);
    assert!(!parse(&["--insecure-diagnostics=false"]).insecure_diagnostics);
    assert!(parse(&["--insecure-diagnostics=1"]).insecure_diagnostics);
    // A bare flag does not swallow the next argument.
    let args = parse(&["--leader-elect", "--namespace", "x"]);
    assert!(args.leader_elect);
    assert_eq!(args.namespace, "x");
}

#[test]
fn boolean_flags_and_feature_gates_read_the_same_spellings() {
    use crate::runtime::feature_gates::FeatureGates;
    let candidates = [
        "1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False", "yes",
        "tRUE", "on", "2",
    ];
    for value in candidates {
        let flag = Args::try_parse_from(["manager", &format!("--leader-elect={value}")])
            .ok()
            .map(|args| args.leader_elect);
        // A gate whose default is on, so that `false` shows.
        let gate = format!("MachinePool={value}")
            .parse::<FeatureGates>()
            .ok()
            .map(|gates| gates.enabled(Feature::MachinePool));
        assert_eq!(flag, gate, "{value:?}: the flag and the gate disagree");
        let go = matches!(value, "1" | "t" | "T" | "TRUE" | "true" | "True");
        let accepted = go || matches!(value, "0" | "f" | "F" | "FALSE" | "false" | "False");
        assert_eq!(flag, accepted.then_some(go), "{value:?}");
    }
}

#[test]
fn verbosity_takes_the_klog_forms() {
    assert_eq!(parse(&["-v", "4"]).v, 4);
    assert_eq!(parse(&["-v=4"]).v, 4);
    assert_eq!(parse(&["--v=0"]).v, 0);
    assert_eq!(parse(&["--v", "6"]).v, 6);
}

#[test]
fn the_capd_deployment_arguments_parse() {
    let args = parse(&[
        "--leader-elect",
        "--diagnostics-address=:8443",
        "--insecure-diagnostics=false",
        "--feature-gates=MachinePool=true,ClusterTopology=false",
    ]);
    assert!(args.leader_elect);
    assert!(!args.insecure_diagnostics);
}

#[test]
fn disabled_servers_use_zero() {
    let args = parse(&["--health-addr=0", "--diagnostics-address=0"]);
    assert_eq!(args.health_addr, ListenAddr::Disabled);
    assert_eq!(args.diagnostics_address, ListenAddr::Disabled);
}

fn assert_rejected(flags: &[&str], expected_fragment: &str) {
    let err = rejection(flags);
    assert_eq!(err.kind(), ErrorKind::ValueValidation, "{err}");
    let message = err.to_string();
    assert!(message.contains(expected_fragment), "{flags:?}: {message}");
}

#[test]
fn bad_values_are_clear_errors() {
    assert_rejected(&["--sync-period=10"], "missing unit");
    assert_rejected(&["--leader-elect-lease-duration=15x"], "unknown unit \"x\"");
    assert_rejected(&["--leader-elect-retry-period=-2s"], "must not be negative");
    assert_rejected(
        &["--feature-gates=Bogus=true"],
        "unrecognized feature gate \"Bogus\"",
    );
    assert_rejected(
        &["--feature-gates=MachinePool=maybe"],
        "expected true or false",
    );
    assert_rejected(&["--leader-elect=yes"], "invalid boolean \"yes\"");
    assert_rejected(&["--health-addr=9440"], "expected host:port");
    assert_rejected(&["--diagnostics-address=:99999"], "from 0 to 65535");
    assert_rejected(&["--kube-api-qps=0"], "positive number");
    assert_rejected(&["--kube-api-qps=fast"], "positive number");
    assert_rejected(&["--kube-api-burst=0"], "--kube-api-burst");
    assert_rejected(
        &["--dockermachine-concurrency=0"],
        "--dockermachine-concurrency",
    );
    assert_rejected(&["--webhook-port=0"], "--webhook-port");
    assert_rejected(&["--namespace=Team_A"], "invalid namespace \"Team_A\"");
    assert_rejected(&["--watch-filter=-bad"], "invalid label value \"-bad\"");
    assert_rejected(&["--docker-network="], "must not be empty");
    assert_rejected(&["--v=loud"], "--v");
}

#[test]
fn unsupported_tls_versions_and_formats_list_the_choices() {
    let err = rejection(&["--tls-min-version=VersionTLS10"]);
    let message = err.to_string();
    assert!(
        message.contains("VersionTLS12") && message.contains("VersionTLS13"),
        "{message}"
    );
    let err = rejection(&["--logging-format=xml"]);
    assert!(
        err.to_string().contains("[possible values: text, json]"),
        "{err}"
    );
}

#[test]
fn a_repeated_flag_keeps_the_last_value_like_go() {
    assert_eq!(parse(&["--namespace=a", "--namespace=b"]).namespace, "b");
}

#[test]
fn unknown_flags_are_rejected() {
    assert_eq!(
        rejection(&["--leader-election"]).kind(),
        ErrorKind::UnknownArgument
    );
}

#[test]
fn the_gardener_controller_is_off_unless_asked_for() {
    assert!(!parse(&[]).gardener_infrastructure);
    assert!(parse(&["--gardener-infrastructure"]).gardener_infrastructure);
    assert!(!parse(&["--gardener-infrastructure=false"]).gardener_infrastructure);
}

#[test]
fn the_cluster_api_controllers_run_unless_the_flags_say_otherwise() {
    let set = |flags: &[&str]| parse(flags).controller_set().to_string();
    assert_eq!(set(&[]), "cluster-api");
    assert_eq!(
        set(&["--controllers=gardener-infrastructure"]),
        "gardener-infrastructure"
    );
    assert_eq!(
        set(&["--controllers", "cluster-api,gardener-infrastructure"]),
        "cluster-api,gardener-infrastructure"
    );
    assert_eq!(
        set(&["--gardener-infrastructure"]),
        "cluster-api,gardener-infrastructure",
        "the older flag adds the Gardener controller to the default"
    );
    assert_eq!(
        set(&[
            "--controllers=gardener-infrastructure",
            "--gardener-infrastructure"
        ]),
        "gardener-infrastructure"
    );
}

#[test]
fn an_empty_or_unknown_controller_set_is_a_clear_error() {
    assert_rejected(&["--controllers="], "no controller named");
    assert_rejected(
        &["--controllers=cluster-api,capd"],
        "unknown controller \"capd\": expected cluster-api or gardener-infrastructure",
    );
}

/// Every long flag of the manager, from clap's own definition.
fn flag_names() -> Vec<String> {
    Args::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect()
}

fn flag_value() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        proptest::sample::select(
            &[
                "",
                "0",
                "-1",
                ":8443",
                "127.0.0.1:0",
                "[::1]:65536",
                "1h30m",
                "1.5h",
                "-5s",
                "9999999999999h",
                "true",
                "false",
                "MachinePool=true,Foo=bar",
                "=",
                ",",
                "a=b=c",
                "VersionTLS13",
                "json",
                "text",
                "cluster-api,gardener-infrastructure",
                "µs",
            ][..]
        )
        .prop_map(str::to_string),
        "[ -~]{0,16}",
        "[0-9]{1,25}",
    ]
}

proptest::proptest! {
    #![proptest_config(crate::fuzz::config(128))]

    /// Any command line is parsed or refused with clap's error, never a panic.
    #[test]
    fn fuzz_manager_flags(
        flags in proptest::collection::vec(
            (proptest::sample::select(flag_names()), flag_value(), 0u8..3),
            0..6,
        ),
    ) {
        let mut argv = vec!["manager".to_string()];
        for (name, value, form) in flags {
            match form {
                0 => argv.push(format!("--{name}={value}")),
                1 => argv.extend([format!("--{name}"), value]),
                _ => argv.push(format!("--{name}")),
            }
        }
        // What the manager does with parsed flags before it starts anything.
        if let Ok(args) = Args::try_parse_from(&argv) {
            let _ = args.controller_set();
            let _ = crate::manager::leader::LeaderElectionConfig::new(
                "ns".into(),
                "me".into(),
                args.leader_elect_lease_duration,
                args.leader_elect_renew_deadline,
                args.leader_elect_retry_period,
            );
        }
    }
}

#[test]
fn crd_migration_phases_are_skipped_by_cluster_api_names() {
    use crate::crdmigrator::Phase;
    assert!(parse(&[]).skipped_crd_migration_phases().is_empty());
    assert!(
        parse(&["--skip-crd-migration-phases="])
            .skipped_crd_migration_phases()
            .is_empty(),
        "empty, as pflag reads it"
    );
    assert_eq!(
        parse(&["--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields"])
            .skipped_crd_migration_phases(),
        [Phase::StorageVersionMigration, Phase::CleanupManagedFields]
    );
    assert_eq!(
        parse(&[
            "--skip-crd-migration-phases=CleanupManagedFields",
            "--skip-crd-migration-phases=StorageVersionMigration"
        ])
        .skipped_crd_migration_phases(),
        [Phase::CleanupManagedFields, Phase::StorageVersionMigration],
        "repeated, as pflag's string slices accumulate"
    );
    assert_rejected(
        &["--skip-crd-migration-phases=All"],
        "expected StorageVersionMigration or CleanupManagedFields",
    );
    assert_rejected(
        &["--skip-crd-migration-phases=StorageVersionMigration,"],
        "invalid CRD migration phase",
    );
}
