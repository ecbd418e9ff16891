use serde_json::{Value, json};

use super::*;

fn config(networks: Value) -> Value {
    json!({
        "apiVersion": "docker.provider.extensions.gardener.cloud/v1alpha1",
        "kind": "InfrastructureConfig",
        "networks": networks,
    })
}

fn problems(raw: Value) -> Vec<String> {
    match validate(Some(&raw), "shoot--p--s", "s") {
        Ok(plan) => panic!("expected errors, got {plan:?}"),
        Err(errors) => errors.0.iter().map(|e| e.field.clone()).collect(),
    }
}

#[test]
fn absent_config_gives_the_default_network() {
    let plan = validate(None, "shoot--p--s", "s").unwrap();
    assert_eq!(
        plan,
        NetworkPlan {
            name: "gardener-shoot--p--s-s".into(),
            ipv4: None,
            ipv6: Ipv6Plan::Disabled,
        }
    );
    let empty = validate(Some(&config(json!({}))), "shoot--p--s", "s").unwrap();
    assert_eq!(empty, plan);
}

#[test]
fn full_config_is_resolved() {
    let raw = config(json!({
        "name": "my-net",
        "cidr": "10.213.0.0/24",
        "ipv6": {"cidr": "fd00:10::/64"},
    }));
    let plan = validate(Some(&raw), "ns", "infra").unwrap();
    assert_eq!(plan.name, "my-net");
    assert_eq!(plan.ipv4, Some("10.213.0.0/24".parse().unwrap()));
    assert_eq!(plan.ipv6, Ipv6Plan::Subnet("fd00:10::/64".parse().unwrap()));

    let derived = config(json!({"ipv6": {"enabled": true}}));
    assert_eq!(
        validate(Some(&derived), "ns", "infra").unwrap().ipv6,
        Ipv6Plan::Derived
    );
    let off = config(json!({"ipv6": {"enabled": false}}));
    assert_eq!(
        validate(Some(&off), "ns", "infra").unwrap().ipv6,
        Ipv6Plan::Disabled
    );
}

#[test]
fn every_problem_is_reported_with_its_field() {
    let raw = config(json!({
        "name": "-bad name",
        "cidr": "10.0.0.1/24",
        "ipv6": {"cidr": "fe80::/64"},
    }));
    let err = validate(Some(&raw), "ns", "infra").unwrap_err();
    let fields: Vec<&str> = err.0.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "providerConfig.networks.name",
            "providerConfig.networks.cidr",
            "providerConfig.networks.ipv6.cidr"
        ]
    );
    let text = err.to_string();
    assert!(
        text.contains("the network address is 10.0.0.0/24"),
        "the message suggests the fix: {text}"
    );
    assert!(text.contains("link-local"), "{text}");
}

#[test]
fn wrong_api_version_kind_and_unknown_fields_are_refused() {
    let wrong =
        json!({"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "Other"});
    assert_eq!(
        problems(wrong),
        ["providerConfig.apiVersion", "providerConfig.kind"]
    );
    let typo = config(json!({"cidrr": "10.0.0.0/24"}));
    let err = validate(Some(&typo), "ns", "n").unwrap_err();
    assert_eq!(err.0[0].field, "providerConfig");
    assert!(err.to_string().contains("unknown field `cidrr`"), "{err}");
    assert_eq!(
        problems(json!("a string")),
        ["providerConfig"],
        "a providerConfig that is not an object is a configuration problem"
    );
}

#[test]
fn cidrs_outside_usable_ranges_are_refused() {
    for cidr in [
        "10.0.0.0/30",
        "10.0.0.0/7",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "224.0.0.0/8",
        "240.0.0.0/8",
        "0.0.0.0/8",
        "fd00::/64",
        "10.0.0.0",
        "",
    ] {
        assert_eq!(
            problems(config(json!({"cidr": cidr}))),
            ["providerConfig.networks.cidr"],
            "{cidr:?} must be refused"
        );
    }
    for cidr in ["10.213.0.0/24", "172.30.0.0/16", "192.168.100.0/29"] {
        assert!(
            validate(Some(&config(json!({"cidr": cidr}))), "ns", "n").is_ok(),
            "{cidr} is usable"
        );
    }
    for cidr in [
        "ff00::/64",
        "::1/128",
        "fd00::/16",
        "fd00::1/64",
        "10.0.0.0/24",
    ] {
        assert_eq!(
            problems(config(json!({"ipv6": {"cidr": cidr}}))),
            ["providerConfig.networks.ipv6.cidr"],
            "{cidr:?} must be refused"
        );
    }
}

#[test]
fn contradictory_ipv6_and_predefined_names_are_refused() {
    assert_eq!(
        problems(config(
            json!({"ipv6": {"enabled": false, "cidr": "fd00:1::/64"}})
        )),
        ["providerConfig.networks.ipv6.cidr"]
    );
    for name in ["bridge", "host", "none", "", "a/b", &"n".repeat(129)] {
        assert_eq!(
            problems(config(json!({ "name": name }))),
            ["providerConfig.networks.name"],
            "{name:?} must be refused"
        );
    }
    assert!(validate(Some(&config(json!({"name": "kind"}))), "ns", "n").is_ok());
}

#[test]
fn long_default_names_are_shortened_deterministically() {
    let long = "x".repeat(200);
    let name = default_network_name("shoot--p--s", &long);
    assert_eq!(name.len(), MAX_NETWORK_NAME_LEN);
    assert!(name.starts_with("gardener-shoot--p--s-xxx"));
    assert_eq!(name, default_network_name("shoot--p--s", &long));
    assert_ne!(
        name,
        default_network_name("shoot--p--t", &long),
        "the hash tells long names apart"
    );
    assert!(network_name_problem(&name).is_none());
}

#[test]
fn config_round_trips_through_yaml() {
    let yaml = "apiVersion: docker.provider.extensions.gardener.cloud/v1alpha1\n\
                kind: InfrastructureConfig\n\
                networks:\n  name: my-net\n  cidr: 10.213.0.0/24\n  ipv6:\n    enabled: true\n";
    let parsed: InfrastructureConfig = serde_saphyr::from_str(yaml).unwrap();
    assert_eq!(parsed.networks.name.as_deref(), Some("my-net"));
    assert_eq!(
        parsed.networks.ipv6,
        Some(Ipv6Config {
            enabled: Some(true),
            cidr: None
        })
    );
    let value = serde_json::to_value(&parsed).unwrap();
    assert_eq!(
        validate(Some(&value), "ns", "n").unwrap().ipv6,
        Ipv6Plan::Derived
    );
}

fn shoot(nodes: Option<&str>, ipv6: bool) -> ShootNetwork {
    ShootNetwork {
        nodes: nodes.map(str::to_string),
        ipv6,
    }
}

#[test]
fn the_shoot_fills_what_the_config_leaves_open() {
    let v4 = shoot(Some("10.250.0.0/16"), false);
    let plan = validate_with(None, "ns", "infra", &v4).unwrap();
    assert_eq!(plan.ipv4, Some("10.250.0.0/16".parse().unwrap()));
    assert_eq!(plan.ipv6, Ipv6Plan::Disabled);

    let given = config(json!({"cidr": "10.213.0.0/24"}));
    assert_eq!(
        validate_with(Some(&given), "ns", "infra", &v4)
            .unwrap()
            .ipv4,
        Some("10.213.0.0/24".parse().unwrap()),
        "the providerConfig wins"
    );

    let dual = shoot(Some("10.250.0.0/16"), true);
    assert_eq!(
        validate_with(None, "ns", "infra", &dual).unwrap().ipv6,
        Ipv6Plan::Derived,
        "a dual-stack shoot gets IPv6"
    );
    let off = config(json!({"ipv6": {"enabled": false}}));
    assert_eq!(
        validate_with(Some(&off), "ns", "infra", &dual)
            .unwrap()
            .ipv6,
        Ipv6Plan::Disabled,
        "unless the providerConfig turns it off"
    );

    let v6 = shoot(Some("fd00:10:20::/64"), true);
    let plan = validate_with(None, "ns", "infra", &v6).unwrap();
    assert_eq!(plan.ipv4, None);
    assert_eq!(
        plan.ipv6,
        Ipv6Plan::Subnet("fd00:10:20::/64".parse().unwrap())
    );
}

#[test]
fn an_unusable_shoot_nodes_cidr_is_reported_as_the_shoot_s() {
    let err = validate_with(None, "ns", "infra", &shoot(Some("10.250.0.0/30"), false)).unwrap_err();
    assert_eq!(err.0.len(), 1);
    assert_eq!(err.0[0].field, "shoot.spec.networking.nodes");
    assert!(
        validate_with(
            Some(&config(json!({"cidr": "10.213.0.0/24"}))),
            "ns",
            "infra",
            &shoot(Some("10.250.0.0/30"), false)
        )
        .is_ok(),
        "not used when the providerConfig sets the subnet"
    );
}
