//! The `/convert` endpoint: a ConversionReview in, every object converted to the desired version
//! through [`crate::api::conversion::convert_object`] out. All or nothing, as the API server
//! requires: one object that cannot be converted fails the whole review, naming that object.

use serde_json::Value;

use super::Reply;
use super::review::{
    CONVERSION_API_VERSION, ConversionRequest, ConversionReviewRequest, ConversionReviewResponse,
};
use crate::api::conversion::{ConversionError, convert_object};
use crate::runtime::error_chain;

/// Why a conversion review could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The body is not a ConversionReview.
    #[error("failed to decode the ConversionReview")]
    Decode(#[source] serde_json::Error),
    /// The review is of another version or kind.
    #[error(
        "unsupported review {api_version}/{kind}: this webhook speaks {CONVERSION_API_VERSION} ConversionReview"
    )]
    UnsupportedReview {
        /// `apiVersion` of the review.
        api_version: String,
        /// `kind` of the review.
        kind: String,
    },
    /// The review has no `request`.
    #[error("the ConversionReview has no request")]
    MissingRequest,
    /// One object failed to convert.
    #[error("failed to convert object {index} ({object}) to {desired}")]
    Object {
        /// Position in the request.
        index: usize,
        /// `Kind namespace/name` of the object.
        object: String,
        /// The desired apiVersion.
        desired: String,
        /// Why.
        #[source]
        source: ConversionError,
    },
}

/// Answers one conversion request. Never fails: an unreadable review gets HTTP 400 with a
/// `Failure` result, a failed conversion HTTP 200 with a `Failure` result naming the object.
pub fn review(body: &[u8]) -> Reply {
    let request = match parse(body) {
        Ok(request) => request,
        Err(error) => return refuse(400, error_chain(&error)),
    };
    match convert_all(&request) {
        Ok(converted) => {
            tracing::debug!(
                uid = %request.uid,
                objects = converted.len(),
                desired = %request.desired_api_version,
                "Converted"
            );
            Reply::json(
                200,
                &ConversionReviewResponse::success(&request.uid, converted),
            )
        }
        Err(error) => {
            let message = error_chain(&error);
            tracing::warn!(uid = %request.uid, error = %message, "Conversion failed");
            Reply::json(
                200,
                &ConversionReviewResponse::failure(&request.uid, message),
            )
        }
    }
}

/// A review refusing a request whose uid could not be read, with HTTP `status` (400 for a body
/// that is no ConversionReview, 413 for one too large).
pub fn refuse(status: u16, message: String) -> Reply {
    tracing::warn!(status, error = %message, "Refusing unreadable conversion request");
    Reply::json(status, &ConversionReviewResponse::failure("", message))
}

fn parse(body: &[u8]) -> Result<ConversionRequest, ConvertError> {
    let review: ConversionReviewRequest =
        serde_json::from_slice(body).map_err(ConvertError::Decode)?;
    if review.api_version != CONVERSION_API_VERSION || review.kind != "ConversionReview" {
        return Err(ConvertError::UnsupportedReview {
            api_version: review.api_version,
            kind: review.kind,
        });
    }
    review.request.ok_or(ConvertError::MissingRequest)
}

fn convert_all(request: &ConversionRequest) -> Result<Vec<Value>, ConvertError> {
    request
        .objects
        .iter()
        .enumerate()
        .map(|(index, object)| {
            convert_object(object.clone(), &request.desired_api_version).map_err(|source| {
                ConvertError::Object {
                    index,
                    object: describe(object),
                    desired: request.desired_api_version.clone(),
                    source,
                }
            })
        })
        .collect()
}

/// `DockerCluster default/c1`, from whatever the object carries.
fn describe(object: &Value) -> String {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let kind = match text("/kind") {
        "" => "(no kind)",
        kind => kind,
    };
    let namespace = text("/metadata/namespace");
    let name = text("/metadata/name");
    if namespace.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {namespace}/{name}")
    }
}
