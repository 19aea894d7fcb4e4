//! The kernel's ids and hashes as SQL column values, for both backends: written as their text,
//! read back leniently (`from_stored`), so a row an older `main` wrote before a shape rule
//! existed still loads (issue #19). Kept apart from the row mapping, which names the types and
//! nothing else.

use crate::approver::ApproverId;
use crate::id::{ActionHash, ApprovalId, AttemptId, EffectKey, PolicyHash, Principal, ReceiptHash};

/// `ToSql` / `FromSql` (rusqlite) and, with the `postgres` feature, sqlx's `Type`, `Encode` and
/// `Decode` for Postgres, all as `TEXT`.
macro_rules! text_column {
    ($($name:ident),* $(,)?) => {$(
        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(rusqlite::types::ToSqlOutput::from(self.as_str()))
            }
        }

        impl rusqlite::types::FromSql for $name {
            fn column_result(
                value: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                String::column_result(value).map($name::from_stored)
            }
        }

        #[cfg(feature = "postgres")]
        impl sqlx::Type<sqlx::Postgres> for $name {
            fn type_info() -> sqlx::postgres::PgTypeInfo {
                <String as sqlx::Type<sqlx::Postgres>>::type_info()
            }

            fn compatible(info: &sqlx::postgres::PgTypeInfo) -> bool {
                <String as sqlx::Type<sqlx::Postgres>>::compatible(info)
            }
        }

        #[cfg(feature = "postgres")]
        impl<'q> sqlx::Encode<'q, sqlx::Postgres> for $name {
            fn encode_by_ref(
                &self,
                buffer: &mut sqlx::postgres::PgArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<'q, sqlx::Postgres>>::encode(self.as_str(), buffer)
            }
        }

        #[cfg(feature = "postgres")]
        impl<'r> sqlx::Decode<'r, sqlx::Postgres> for $name {
            fn decode(
                value: sqlx::postgres::PgValueRef<'r>,
            ) -> Result<Self, sqlx::error::BoxDynError> {
                <String as sqlx::Decode<'r, sqlx::Postgres>>::decode(value).map($name::from_stored)
            }
        }
    )*};
}

text_column!(
    ActionHash,
    ApprovalId,
    ApproverId,
    AttemptId,
    EffectKey,
    PolicyHash,
    Principal,
    ReceiptHash,
);
