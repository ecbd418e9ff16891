//! The kubeconfig clients use to reach the server.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// Renders a kubeconfig for `url`, trusting `ca_pem` when given, authenticating with a dummy token.
pub fn render(url: &str, ca_pem: Option<&str>, context: &str) -> String {
    let cluster = match ca_pem {
        Some(pem) => format!(
            "    certificate-authority-data: {}\n    server: {url}\n",
            STANDARD.encode(pem)
        ),
        None => format!("    server: {url}\n"),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n{cluster}  name: {context}\ncontexts:\n- context:\n    cluster: {context}\n    user: {context}-admin\n    namespace: default\n  name: {context}\ncurrent-context: {context}\nusers:\n- name: {context}-admin\n  user:\n    token: testapiserver-dummy-token\npreferences: {{}}\n"
    )
}
