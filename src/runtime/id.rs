//! Reservation ids: `z1.{entity}.{resource}.{token}`, each part URL-safe
//! base64 without padding (so an id is one word in a shell, a URL path segment
//! and a log line). The entity and resource name the state item the hold
//! lives in, so `reservation release ID` needs nothing but the id and the
//! store flags; the token (16 random bytes from the OS) is the hold's key
//! inside that item. Nothing is trusted: a parsed id only says where to look,
//! and the hold must be open there.

use crate::items::base64url;
use crate::items::keys;
use crate::random::RandomError;

/// The version tag every id starts with.
const PREFIX: &str = "z1";
/// Random bytes per token (128 bits: ids cannot be guessed).
const TOKEN_BYTES: usize = 16;
/// The longest id: a 256-character entity and a 64-character resource.
pub const MAX_ID_LEN: usize = 2 + 1 + 342 + 1 + 86 + 1 + 22;

/// Why a text is not a reservation id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{shown} is not a reservation id: {why} (ids look like z1.dXNlci0x.Z3B0LTQ.<22 characters>, as `acquire --mode reserve` prints them)")]
pub struct IdError {
    shown: String,
    why: String,
}

/// A well-formed reservation id (its hold may or may not exist).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReservationId {
    pub entity: String,
    pub resource: String,
    /// The hold's key in the state item: 22 URL-safe characters.
    pub token: String,
}

impl ReservationId {
    /// A fresh id for a hold of (entity, resource).
    pub fn generate(entity: &str, resource: &str) -> Result<ReservationId, RandomError> {
        let bytes = crate::random::bytes::<TOKEN_BYTES>()?;
        Ok(ReservationId {
            entity: entity.to_string(),
            resource: resource.to_string(),
            token: base64url::encode(&bytes),
        })
    }

    /// Reads an id, refusing anything [`ReservationId::to_string`] would not
    /// print for a valid entity id and resource name.
    pub fn parse(text: &str) -> Result<ReservationId, IdError> {
        let shown = if text.len() > 40 {
            format!("{:?}…", text.chars().take(40).collect::<String>())
        } else {
            format!("{text:?}")
        };
        let err = |why: &str| IdError {
            shown: shown.clone(),
            why: why.to_string(),
        };
        if text.len() > MAX_ID_LEN {
            return Err(err("it is too long"));
        }
        let parts: Vec<&str> = text.split('.').collect();
        let [prefix, entity, resource, token] = parts[..] else {
            return Err(err("it does not have four dot-separated parts"));
        };
        if prefix != PREFIX {
            return Err(err("it does not start with 'z1.'"));
        }
        let text_of = |part: &str, what: &str| -> Result<String, IdError> {
            base64url::decode(part)
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| err(&format!("its {what} part is not URL-safe base64 of a name")))
        };
        let entity = text_of(entity, "entity")?;
        let resource = text_of(resource, "resource")?;
        keys::validate_entity_id(&entity).map_err(|e| err(&e.to_string()))?;
        keys::validate_resource_name(&resource).map_err(|e| err(&e.to_string()))?;
        match base64url::decode(token) {
            Some(b) if b.len() == TOKEN_BYTES => {}
            _ => return Err(err("its last part is not a 22-character token")),
        }
        Ok(ReservationId {
            entity,
            resource,
            token: token.to_string(),
        })
    }
}

impl std::fmt::Display for ReservationId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{PREFIX}.{}.{}.{}",
            base64url::encode(self.entity.as_bytes()),
            base64url::encode(self.resource.as_bytes()),
            self.token
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ids_round_trip_and_are_url_safe() {
        let id = ReservationId::generate("user-1", "openai/gpt-4:turbo").unwrap();
        let text = id.to_string();
        assert!(text.starts_with("z1.dXNlci0x."), "{text}");
        assert!(text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')));
        assert_eq!(ReservationId::parse(&text), Ok(id.clone()));
        assert_eq!(id.token.len(), 22);
        let other = ReservationId::generate("user-1", "openai/gpt-4:turbo").unwrap();
        assert_ne!(other.token, id.token);
        let longest = ReservationId::generate(&"e".repeat(256), &"r".repeat(64)).unwrap();
        assert_eq!(longest.to_string().len(), MAX_ID_LEN);
        assert!(ReservationId::parse(&longest.to_string()).is_ok());
    }

    #[test]
    fn malformed_ids_are_refused_with_a_reason() {
        let good = ReservationId::generate("u", "gpt-4").unwrap().to_string();
        let token = good.rsplit('.').next().unwrap().to_string();
        let cases = [
            (String::new(), "four"),
            ("z2.dQ.Z3B0LTQ.".to_string() + &token, "'z1.'"),
            ("z1.dQ.Z3B0LTQ".to_string(), "four"),
            ("z1.d$.Z3B0LTQ.".to_string() + &token, "entity part"),
            // '#' is the key delimiter; `_default_` is no resource.
            (
                format!("z1.{}.Z3B0LTQ.{token}", base64url::encode(b"a#b")),
                "'#'",
            ),
            (
                format!("z1.dQ.{}.{token}", base64url::encode(b"_default_")),
                "resource",
            ),
            ("z1.dQ.Z3B0LTQ.short".to_string(), "22-character"),
            (good.clone() + ".x", "four"),
            ("x".repeat(MAX_ID_LEN + 1), "too long"),
        ];
        for (text, why) in cases {
            let e = ReservationId::parse(&text).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in ".{0,80}") {
            let _ = ReservationId::parse(&text);
        }
    }
}
