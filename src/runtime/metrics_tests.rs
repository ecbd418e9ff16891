use super::*;

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

/// The value of the sample line that starts with `series` (name and labels).
fn value_of(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_registered_controller_exposes_zero_series_before_any_reconcile() {
    let metrics = Metrics::new();
    metrics.register_controller("dockermachine", 100);
    let text = metrics.render();
    assert_eq!(
        value_of(
            &text,
            r#"controller_runtime_reconcile_total{controller="dockermachine",result="success"}"#
        ),
        Some(0.0)
    );
    assert_eq!(
        value_of(
            &text,
            r#"controller_runtime_max_concurrent_reconciles{controller="dockermachine"}"#
        ),
        Some(100.0)
    );
    assert_eq!(
        value_of(
            &text,
            r#"workqueue_depth{controller="dockermachine",name="dockermachine"}"#
        ),
        Some(0.0)
    );
}

#[test]
fn reconciles_are_counted_by_result_and_errors_by_category() {
    let metrics = Metrics::new();
    metrics.reconcile_started("dockercluster").finish(Ok(()));
    metrics.reconcile_started("dockercluster").finish(Ok(()));
    metrics
        .reconcile_started("dockercluster")
        .finish(Err("docker"));
    metrics
        .reconcile_started("dockermachine")
        .finish(Err("kube"));
    let text = metrics.render();
    let total = |c: &str, r: &str| {
        value_of(
            &text,
            &format!(r#"controller_runtime_reconcile_total{{controller="{c}",result="{r}"}}"#),
        )
    };
    assert_eq!(total("dockercluster", "success"), Some(2.0));
    assert_eq!(total("dockercluster", "error"), Some(1.0));
    assert_eq!(total("dockermachine", "error"), Some(1.0));
    assert_eq!(
        value_of(
            &text,
            r#"controller_runtime_reconcile_errors_total{controller="dockercluster",category="docker"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        value_of(
            &text,
            r#"controller_runtime_reconcile_errors_total{controller="dockermachine",category="kube"}"#
        ),
        Some(1.0)
    );
}

#[test]
fn durations_fill_cumulative_histogram_buckets() {
    let metrics = Metrics::new();
    metrics.reconcile_started("dockermachine").finish(Ok(()));
    let text = metrics.render();
    let bucket = |le: &str| {
        value_of(
            &text,
            &format!(
                r#"controller_runtime_reconcile_time_seconds_bucket{{controller="dockermachine",le="{le}"}}"#
            ),
        )
    };
    // An immediate reconcile lands in the smallest bucket, and so in every larger one.
    assert_eq!(bucket("0.005"), Some(1.0));
    assert_eq!(bucket("300"), Some(1.0));
    assert_eq!(bucket("+Inf"), Some(1.0));
    assert_eq!(
        value_of(
            &text,
            r#"controller_runtime_reconcile_time_seconds_count{controller="dockermachine"}"#
        ),
        Some(1.0)
    );
    let sum = value_of(
        &text,
        r#"controller_runtime_reconcile_time_seconds_sum{controller="dockermachine"}"#,
    );
    assert!(sum.is_some_and(|s| (0.0..0.005).contains(&s)), "{sum:?}");
}

#[test]
fn active_workers_follow_running_reconciles_even_when_cancelled() {
    let metrics = Metrics::new();
    let active = |m: &Metrics| {
        value_of(
            &m.render(),
            r#"controller_runtime_active_workers{controller="dockermachine"}"#,
        )
    };
    let first = metrics.reconcile_started("dockermachine");
    let second = metrics.reconcile_started("dockermachine");
    assert_eq!(active(&metrics), Some(2.0));
    first.finish(Ok(()));
    drop(second);
    assert_eq!(active(&metrics), Some(0.0));
    let text = metrics.render();
    assert_eq!(
        value_of(
            &text,
            r#"controller_runtime_reconcile_time_seconds_count{controller="dockermachine"}"#
        ),
        Some(1.0),
        "a cancelled reconcile has no outcome to record"
    );
}

#[test]
fn queue_depth_and_leadership_are_gauges() {
    let metrics = Metrics::new();
    assert!(!metrics.render().contains("leader_election_master_status"));
    metrics.set_queue_depth("dockercluster", 7);
    metrics.set_leader("controller-leader-election-capd", true);
    let text = metrics.render();
    assert_eq!(
        value_of(
            &text,
            r#"workqueue_depth{controller="dockercluster",name="dockercluster"}"#
        ),
        Some(7.0)
    );
    assert_eq!(
        value_of(
            &text,
            r#"leader_election_master_status{name="controller-leader-election-capd"}"#
        ),
        Some(1.0)
    );
}

#[test]
fn exposition_declares_each_family_once_before_its_samples() {
    let metrics = Metrics::new();
    metrics.register_controller("dockercluster", 50);
    metrics.register_controller("dockermachine", 100);
    metrics
        .reconcile_started("dockermachine")
        .finish(Err("docker"));
    metrics.set_leader("controller-leader-election-capd", false);
    let text = metrics.render();
    let mut declared: Vec<&str> = Vec::new();
    for line in lines(&text) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap();
            assert!(!declared.contains(&name), "family {name} declared twice");
            declared.push(name);
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let name = line.split(['{', ' ']).next().unwrap();
        let family = declared.last().copied().unwrap_or_default();
        assert!(
            name == family
                || name
                    .strip_prefix(family)
                    .is_some_and(|s| ["_bucket", "_sum", "_count"].contains(&s)),
            "sample {line:?} is not under its family (last declared {family})"
        );
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "sample value in {line:?}");
    }
    assert!(text.ends_with('\n'));
}

#[test]
fn exposition_keeps_controller_runtime_names_and_help_lines() {
    let metrics = Metrics::new();
    metrics.register_controller("dockercluster", 10);
    metrics
        .reconcile_started("dockercluster")
        .finish(Err("docker"));
    let text = metrics.render();
    for line in [
        "# TYPE controller_runtime_reconcile_total counter",
        "# TYPE controller_runtime_reconcile_errors_total counter",
        "# TYPE controller_runtime_reconcile_time_seconds histogram",
        "# TYPE controller_runtime_active_workers gauge",
        "# TYPE controller_runtime_max_concurrent_reconciles gauge",
        "# TYPE workqueue_depth gauge",
        "# HELP controller_runtime_reconcile_total Total number of reconciliations per controller and result.",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} missing from\n{text}"
        );
    }
    assert_eq!(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
}

#[test]
fn the_docker_engine_series_appear_with_the_engine_and_count_each_outage_once() {
    let metrics = Metrics::new();
    assert!(!metrics.render().contains("capd_docker_engine"));
    metrics.set_docker_engine_up(true);
    let text = metrics.render();
    assert_eq!(value_of(&text, "capd_docker_engine_up"), Some(1.0));
    assert_eq!(
        value_of(&text, "capd_docker_engine_outages_total"),
        Some(0.0)
    );
    metrics.set_docker_engine_up(false);
    metrics.set_docker_engine_up(false);
    let text = metrics.render();
    assert_eq!(value_of(&text, "capd_docker_engine_up"), Some(0.0));
    assert_eq!(
        value_of(&text, "capd_docker_engine_outages_total"),
        Some(1.0)
    );
    metrics.set_docker_engine_up(true);
    metrics.set_docker_engine_up(false);
    let text = metrics.render();
    assert_eq!(
        value_of(&text, "capd_docker_engine_outages_total"),
        Some(2.0)
    );
    assert!(
        text.contains("# TYPE capd_docker_engine_up gauge")
            && text.contains("# TYPE capd_docker_engine_outages_total counter"),
        "{text}"
    );
}

#[test]
fn the_engine_serving_the_api_is_a_labelled_info_series() {
    let metrics = Metrics::new();
    metrics.set_docker_engine(&crate::docker::Engine::podman("4.3.1"));
    let text = metrics.render();
    assert!(
        text.lines()
            .any(|l| l == r#"capd_docker_engine_info{engine="podman",version="4.3.1"} 1"#),
        "{text}"
    );
}
