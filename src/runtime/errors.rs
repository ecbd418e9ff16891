//! Errors on one line: the chain of causes every log line, Event message and exit message shows.

use std::error::Error;

/// The error and all its sources on one line, `outer: inner: innermost`, for logs and exit
/// messages. Sources that only repeat their parent's message are skipped.
pub fn error_chain(error: &(dyn Error + 'static)) -> String {
    let mut line = describe(error);
    let mut previous = line.clone();
    let mut source = next_source(error);
    while let Some(cause) = source {
        let text = describe(cause);
        if !text.is_empty() && !previous.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        previous = text;
        source = next_source(cause);
    }
    line
}

/// The cause worth showing after `error`: none after an API error, whose source only repeats the
/// `Status` that [`describe`] already showed.
fn next_source<'a>(error: &'a (dyn Error + 'static)) -> Option<&'a (dyn Error + 'static)> {
    match error.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(_)) => None,
        _ => error.source(),
    }
}

/// One error's own message. kube's API errors print the whole `Status` in debug form; users get
/// what the API server said instead: `<message> (<reason>, HTTP <code>)`.
fn describe(error: &(dyn Error + 'static)) -> String {
    match error.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) => {
            let reason = if status.reason.is_empty() {
                String::new()
            } else {
                format!("{}, ", status.reason)
            };
            format!("{} ({reason}HTTP {})", status.message, status.code)
        }
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_read_as_the_api_server_message() {
        let status = kube::core::Status {
            message: "nodes \"n1\" not found".into(),
            reason: "NotFound".into(),
            code: 404,
            ..kube::core::Status::default()
        };
        let error = kube::Error::Api(Box::new(status));
        assert_eq!(
            error_chain(&error),
            "nodes \"n1\" not found (NotFound, HTTP 404)"
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("start the manager")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("cannot reach the API server at https://127.0.0.1:1")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn error_chain_joins_every_cause() {
        let err = Outer(Middle(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        )));
        assert_eq!(
            error_chain(&err),
            "start the manager: cannot reach the API server at https://127.0.0.1:1: connection refused"
        );
    }
}
