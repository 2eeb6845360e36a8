//! The neutral [`Value`] as PostgreSQL parameters and columns.
//!
//! A statement's parameter types are whatever PostgreSQL inferred from the SQL, so a bound
//! value converts to the type asked for (an integer into `int4`, `bool` or `float8` as
//! well as `int8`); a column decodes by its type. Both refuse, with the types named, what
//! has no faithful conversion.

use bytes::BytesMut;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use crate::db::Value;

type BoxError = Box<dyn std::error::Error + Sync + Send>;

/// One parameter as tokio-postgres binds it.
#[derive(Debug)]
pub(super) struct Param<'a>(pub(super) Value<'a>);

fn is_text(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
    )
}

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
                Type::BOOL => (i != 0).to_sql(ty, out),
                Type::FLOAT8 => (i as f64).to_sql(ty, out),
                Type::FLOAT4 => (i as f32).to_sql(ty, out),
                _ if is_text(ty) => i.to_string().as_str().to_sql(&Type::TEXT, out),
                _ => Err(format!("cannot bind an integer as {ty}: add a CAST in the SQL").into()),
            },
            Value::Real(r) => match *ty {
                Type::FLOAT8 => r.to_sql(ty, out),
                Type::FLOAT4 => (r as f32).to_sql(ty, out),
                _ => Err(format!("cannot bind a real as {ty}: add a CAST in the SQL").into()),
            },
            Value::Text(t) if is_text(ty) => t.to_sql(&Type::TEXT, out),
            Value::Text(_) => {
                Err(format!("cannot bind text as {ty}: add a CAST in the SQL").into())
            }
            Value::Blob(b) if *ty == Type::BYTEA => b.to_sql(ty, out),
            Value::Blob(_) => Err(format!("cannot bind a blob as {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// One column as the server sent it: its type and raw bytes, decoded by [`decode`].
pub(super) struct Raw<'a> {
    ty: Type,
    bytes: Option<&'a [u8]>,
}

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(Raw {
            ty: ty.clone(),
            bytes: Some(raw),
        })
    }

    fn from_sql_null(ty: &Type) -> Result<Self, BoxError> {
        Ok(Raw {
            ty: ty.clone(),
            bytes: None,
        })
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A column's value in the neutral form.
pub(super) fn decode<'a>(raw: &Raw<'a>) -> Result<Value<'a>, BoxError> {
    let Some(bytes) = raw.bytes else {
        return Ok(Value::Null);
    };
    let ty = &raw.ty;
    Ok(match *ty {
        Type::INT8 => Value::Int(i64::from_sql(ty, bytes)?),
        Type::INT4 => Value::Int(i64::from(i32::from_sql(ty, bytes)?)),
        Type::INT2 => Value::Int(i64::from(i16::from_sql(ty, bytes)?)),
        Type::BOOL => Value::Int(i64::from(bool::from_sql(ty, bytes)?)),
        Type::FLOAT8 => Value::Real(f64::from_sql(ty, bytes)?),
        Type::FLOAT4 => Value::Real(f64::from(f32::from_sql(ty, bytes)?)),
        Type::BYTEA => Value::Blob(<&[u8]>::from_sql(ty, bytes)?),
        _ if is_text(ty) => Value::Text(<&str>::from_sql(ty, bytes)?),
        _ => {
            return Err(format!(
                "a column of type {ty} has no neutral form: CAST it to BIGINT, DOUBLE \
                 PRECISION or TEXT in the SQL"
            )
            .into());
        }
    })
}
