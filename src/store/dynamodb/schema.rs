//! The table layout zae-limiter 0.17 expects (docs/storage.md, "Table and indexes") and the
//! requests that create it: PK/SK, GSI1–4, LSI1–5 (reserved, but a compatible
//! table must declare them since LSIs cannot be added later), on-demand
//! billing, a NEW_AND_OLD_IMAGES stream, and TTL on `ttl`.

use std::time::Duration;

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    LocalSecondaryIndex, Projection, ProjectionType, ScalarAttributeType, StreamSpecification,
    StreamViewType, TableStatus, TimeToLiveSpecification,
};

use super::DynamoStore;
use crate::store::StoreError;

/// (index, partition key, sort key, projection) of the global secondary indexes.
pub const GSIS: [(&str, &str, &str, ProjectionType); 4] = [
    ("GSI1", "GSI1PK", "GSI1SK", ProjectionType::All),
    ("GSI2", "GSI2PK", "GSI2SK", ProjectionType::All),
    ("GSI3", "GSI3PK", "GSI3SK", ProjectionType::KeysOnly),
    ("GSI4", "GSI4PK", "GSI4SK", ProjectionType::KeysOnly),
];

/// (index, sort key, projection) of the local secondary indexes (partition key `PK`).
pub const LSIS: [(&str, &str, ProjectionType); 5] = [
    ("LSI1", "LSI1SK", ProjectionType::All),
    ("LSI2", "LSI2SK", ProjectionType::KeysOnly),
    ("LSI3", "LSI3SK", ProjectionType::All),
    ("LSI4", "LSI4SK", ProjectionType::KeysOnly),
    ("LSI5", "LSI5SK", ProjectionType::All),
];

/// What `create_table` found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    Created,
    AlreadyExisted,
}

fn key(attr: &str, kt: KeyType) -> Result<KeySchemaElement, StoreError> {
    KeySchemaElement::builder()
        .attribute_name(attr)
        .key_type(kt)
        .build()
        .map_err(invalid)
}

fn invalid(e: aws_sdk_dynamodb::error::BuildError) -> StoreError {
    StoreError::Backend(format!("invalid table definition: {e}"))
}

fn projection(p: &ProjectionType) -> Projection {
    Projection::builder().projection_type(p.clone()).build()
}

impl DynamoStore {
    /// Creates the table (or accepts an existing one), waits until it is
    /// ACTIVE and enables TTL on `ttl`.
    pub fn create_table(&self) -> Result<Created, StoreError> {
        let table = self.table_name_owned();
        let mut attrs = vec!["PK", "SK"];
        for (_, pk, sk, _) in &GSIS {
            attrs.extend([*pk, *sk]);
        }
        attrs.extend(LSIS.iter().map(|(_, sk, _)| *sk));
        let attr_defs = attrs
            .iter()
            .map(|a| {
                AttributeDefinition::builder()
                    .attribute_name(*a)
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(invalid)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let gsis = GSIS
            .iter()
            .map(|(name, pk, sk, p)| {
                GlobalSecondaryIndex::builder()
                    .index_name(*name)
                    .key_schema(key(pk, KeyType::Hash)?)
                    .key_schema(key(sk, KeyType::Range)?)
                    .projection(projection(p))
                    .build()
                    .map_err(invalid)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let lsis = LSIS
            .iter()
            .map(|(name, sk, p)| {
                LocalSecondaryIndex::builder()
                    .index_name(*name)
                    .key_schema(key("PK", KeyType::Hash)?)
                    .key_schema(key(sk, KeyType::Range)?)
                    .projection(projection(p))
                    .build()
                    .map_err(invalid)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let stream = StreamSpecification::builder()
            .stream_enabled(true)
            .stream_view_type(StreamViewType::NewAndOldImages)
            .build()
            .map_err(invalid)?;
        let res = self.block_on(
            self.client()
                .create_table()
                .table_name(&table)
                .set_attribute_definitions(Some(attr_defs))
                .key_schema(key("PK", KeyType::Hash)?)
                .key_schema(key("SK", KeyType::Range)?)
                .set_global_secondary_indexes(Some(gsis))
                .set_local_secondary_indexes(Some(lsis))
                .billing_mode(BillingMode::PayPerRequest)
                .stream_specification(stream)
                .send(),
        );
        let created = match res {
            Ok(_) => Created::Created,
            Err(e) if e.code() == Some("ResourceInUseException") => Created::AlreadyExisted,
            Err(e) => return Err(self.explain(e, "CreateTable", None)),
        };
        self.wait_active()?;
        self.enable_ttl()?;
        Ok(created)
    }

    fn table_name_owned(&self) -> String {
        crate::store::Store::table_name(self).to_string()
    }

    /// Polls DescribeTable until the table is ACTIVE (at most about two minutes).
    fn wait_active(&self) -> Result<(), StoreError> {
        let table = self.table_name_owned();
        for _ in 0..240 {
            let res = self.block_on(self.client().describe_table().table_name(&table).send());
            let out = res.map_err(|e| self.explain(e, "DescribeTable", None))?;
            let status = out.table.and_then(|t| t.table_status);
            if status == Some(TableStatus::Active) {
                return Ok(());
            }
            self.block_on(tokio::time::sleep(Duration::from_millis(500)));
        }
        Err(StoreError::Backend(format!(
            "table '{table}' did not become ACTIVE within two minutes"
        )))
    }

    /// UpdateTimeToLive(`ttl`); a table that already has it enabled is fine.
    fn enable_ttl(&self) -> Result<(), StoreError> {
        let table = self.table_name_owned();
        let spec = TimeToLiveSpecification::builder()
            .attribute_name("ttl")
            .enabled(true)
            .build()
            .map_err(invalid)?;
        let res = self.block_on(
            self.client()
                .update_time_to_live()
                .table_name(&table)
                .time_to_live_specification(spec)
                .send(),
        );
        match res {
            Ok(_) => Ok(()),
            Err(e)
                if e.code() == Some("ValidationException")
                    && e.message().is_some_and(|m| m.contains("already enabled")) =>
            {
                Ok(())
            }
            Err(e) => Err(self.explain(e, "UpdateTimeToLive", None)),
        }
    }
}
