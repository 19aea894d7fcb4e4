//! The serde `Serializer` into the value tree, for anything `Serialize`: it refuses NaN and
//! unsafe integers where `serde_json::to_value` would not.

use super::*;

/// The serializer's error: a `CanonicalError`, kept private so serde stays out of the public
/// type's trait list.
pub(super) struct SerializeError(pub(super) CanonicalError);

impl From<CanonicalError> for SerializeError {
    fn from(error: CanonicalError) -> Self {
        SerializeError(error)
    }
}

impl SerializeError {
    fn nested_under(self, segment: &str) -> Self {
        SerializeError(self.0.nested_under(segment))
    }

    fn nested_under_index(self, index: usize) -> Self {
        SerializeError(self.0.nested_under_index(index))
    }
}

impl fmt::Debug for SerializeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, formatter)
    }
}

impl fmt::Display for SerializeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, formatter)
    }
}

impl std::error::Error for SerializeError {}

impl ser::Error for SerializeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        SerializeError(CanonicalError::SerializeFailed {
            path: String::new(),
            message: message.to_string(),
        })
    }
}

pub(super) fn unsupported(detail: &'static str) -> SerializeError {
    SerializeError(CanonicalError::UnsupportedValue {
        path: String::new(),
        detail,
    })
}

/// Serializes one value enclosed by `depth` arrays and objects.
#[derive(Clone, Copy)]
pub(super) struct NodeSerializer {
    pub(super) depth: usize,
}

/// `f32` through its shortest decimal form, so `0.1f32` means `0.1`, as `serde_json` writes it.
pub(super) fn widen_f32(value: f32) -> f64 {
    if value.is_finite() {
        value
            .to_string()
            .parse()
            .expect("the Display form of a finite f32 parses as f64")
    } else {
        f64::from(value)
    }
}

impl ser::Serializer for NodeSerializer {
    type Ok = Node;
    type Error = SerializeError;
    type SerializeSeq = ArrayBuilder;
    type SerializeTuple = ArrayBuilder;
    type SerializeTupleStruct = ArrayBuilder;
    type SerializeTupleVariant = TupleVariantBuilder;
    type SerializeMap = ObjectBuilder;
    type SerializeStruct = StructBuilder;
    type SerializeStructVariant = StructVariantBuilder;

    fn serialize_bool(self, value: bool) -> Result<Node, SerializeError> {
        Ok(Node::Bool(value))
    }

    fn serialize_i8(self, value: i8) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_i16(self, value: i16) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_i32(self, value: i32) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_i64(self, value: i64) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_i128(self, value: i128) -> Result<Node, SerializeError> {
        Ok(integer_node(value)?)
    }

    fn serialize_u8(self, value: u8) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_u16(self, value: u16) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_u32(self, value: u32) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_u64(self, value: u64) -> Result<Node, SerializeError> {
        Ok(integer_node(i128::from(value))?)
    }

    fn serialize_u128(self, value: u128) -> Result<Node, SerializeError> {
        match i128::try_from(value) {
            Ok(signed) => Ok(integer_node(signed)?),
            Err(_) => Err(SerializeError(CanonicalError::UnsafeInteger {
                path: String::new(),
                value: value.to_string(),
            })),
        }
    }

    fn serialize_f32(self, value: f32) -> Result<Node, SerializeError> {
        Ok(number_node(widen_f32(value))?)
    }

    fn serialize_f64(self, value: f64) -> Result<Node, SerializeError> {
        Ok(number_node(value)?)
    }

    fn serialize_char(self, value: char) -> Result<Node, SerializeError> {
        Ok(Node::String(value.to_string()))
    }

    fn serialize_str(self, value: &str) -> Result<Node, SerializeError> {
        Ok(Node::String(value.to_owned()))
    }

    fn serialize_bytes(self, value: &[u8]) -> Result<Node, SerializeError> {
        enter(self.depth)?;
        Ok(Node::Array(
            value
                .iter()
                .map(|byte| Node::Number(f64::from(*byte)))
                .collect(),
        ))
    }

    fn serialize_none(self) -> Result<Node, SerializeError> {
        Ok(Node::Null)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Node, SerializeError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<Node, SerializeError> {
        Ok(Node::Null)
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<Node, SerializeError> {
        Ok(Node::Null)
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Node, SerializeError> {
        Ok(Node::String(variant.to_owned()))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Node, SerializeError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Node, SerializeError> {
        let depth = enter(self.depth)?;
        let inner = value
            .serialize(NodeSerializer { depth })
            .map_err(|error| error.nested_under(variant))?;
        Ok(object_node(vec![(variant.to_owned(), inner)])?)
    }

    fn serialize_seq(self, length: Option<usize>) -> Result<ArrayBuilder, SerializeError> {
        Ok(ArrayBuilder {
            depth: enter(self.depth)?,
            items: Vec::with_capacity(length.unwrap_or(0).min(1024)),
        })
    }

    fn serialize_tuple(self, length: usize) -> Result<ArrayBuilder, SerializeError> {
        self.serialize_seq(Some(length))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        length: usize,
    ) -> Result<ArrayBuilder, SerializeError> {
        self.serialize_seq(Some(length))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        length: usize,
    ) -> Result<TupleVariantBuilder, SerializeError> {
        let outer = enter(self.depth)?;
        let array = NodeSerializer { depth: outer }
            .serialize_seq(Some(length))
            .map_err(|error| error.nested_under(variant))?;
        Ok(TupleVariantBuilder { variant, array })
    }

    fn serialize_map(self, _length: Option<usize>) -> Result<ObjectBuilder, SerializeError> {
        Ok(ObjectBuilder {
            depth: enter(self.depth)?,
            members: Vec::new(),
            pending_key: None,
        })
    }

    fn serialize_struct(
        self,
        name: &'static str,
        length: usize,
    ) -> Result<StructBuilder, SerializeError> {
        if name == RAW_VALUE_TOKEN || name == ARBITRARY_NUMBER_TOKEN {
            return Ok(StructBuilder::Token {
                name,
                depth: self.depth,
                node: None,
            });
        }
        Ok(StructBuilder::Object(self.serialize_map(Some(length))?))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        length: usize,
    ) -> Result<StructVariantBuilder, SerializeError> {
        let outer = enter(self.depth)?;
        let object = NodeSerializer { depth: outer }
            .serialize_map(Some(length))
            .map_err(|error| error.nested_under(variant))?;
        Ok(StructVariantBuilder { variant, object })
    }
}

pub(super) struct ArrayBuilder {
    /// The array's own level.
    depth: usize,
    items: Vec<Node>,
}

impl ArrayBuilder {
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SerializeError> {
        let index = self.items.len();
        let item = value
            .serialize(NodeSerializer { depth: self.depth })
            .map_err(|error| error.nested_under_index(index))?;
        self.items.push(item);
        Ok(())
    }
}

impl ser::SerializeSeq for ArrayBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.push(value)
    }

    fn end(self) -> Result<Node, SerializeError> {
        Ok(Node::Array(self.items))
    }
}

impl ser::SerializeTuple for ArrayBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.push(value)
    }

    fn end(self) -> Result<Node, SerializeError> {
        Ok(Node::Array(self.items))
    }
}

impl ser::SerializeTupleStruct for ArrayBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.push(value)
    }

    fn end(self) -> Result<Node, SerializeError> {
        Ok(Node::Array(self.items))
    }
}

pub(super) struct TupleVariantBuilder {
    variant: &'static str,
    array: ArrayBuilder,
}

impl ser::SerializeTupleVariant for TupleVariantBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        let variant = self.variant;
        self.array
            .push(value)
            .map_err(|error| error.nested_under(variant))
    }

    fn end(self) -> Result<Node, SerializeError> {
        let array = Node::Array(self.array.items);
        Ok(object_node(vec![(self.variant.to_owned(), array)])?)
    }
}

pub(super) struct ObjectBuilder {
    /// The object's own level.
    depth: usize,
    members: Vec<(String, Node)>,
    pending_key: Option<String>,
}

impl ObjectBuilder {
    fn push<T: Serialize + ?Sized>(
        &mut self,
        key: String,
        value: &T,
    ) -> Result<(), SerializeError> {
        let node = value
            .serialize(NodeSerializer { depth: self.depth })
            .map_err(|error| error.nested_under(&key))?;
        self.members.push((key, node));
        Ok(())
    }

    fn finish(self) -> Result<Node, SerializeError> {
        Ok(object_node(self.members)?)
    }
}

impl ser::SerializeMap for ObjectBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Self::Error> {
        self.pending_key = Some(key.serialize(KeySerializer)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        let key = self.pending_key.take().ok_or_else(|| {
            <SerializeError as ser::Error>::custom("a map value came without its key")
        })?;
        self.push(key, value)
    }

    fn end(self) -> Result<Node, SerializeError> {
        self.finish()
    }
}

pub(super) enum StructBuilder {
    Object(ObjectBuilder),
    /// A `serde_json` private marker struct: one field holding JSON text.
    Token {
        name: &'static str,
        /// Arrays and objects enclosing the marker.
        depth: usize,
        node: Option<Node>,
    },
}

impl ser::SerializeStruct for StructBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        match self {
            StructBuilder::Object(object) => object.push(key.to_owned(), value),
            StructBuilder::Token { name, depth, node } => {
                let Node::String(text) = value.serialize(NodeSerializer { depth: *depth })? else {
                    return Err(unsupported("a raw JSON marker must hold JSON text"));
                };
                let parsed = parse_document(&text, *depth, Source::Outside)?;
                if *name == ARBITRARY_NUMBER_TOKEN && !matches!(parsed, Node::Number(_)) {
                    return Err(unsupported("a JSON number marker must hold a number"));
                }
                *node = Some(parsed);
                Ok(())
            }
        }
    }

    fn end(self) -> Result<Node, SerializeError> {
        match self {
            StructBuilder::Object(object) => object.finish(),
            StructBuilder::Token { node, .. } => {
                node.ok_or_else(|| unsupported("a raw JSON marker must hold JSON text"))
            }
        }
    }
}

pub(super) struct StructVariantBuilder {
    variant: &'static str,
    object: ObjectBuilder,
}

impl ser::SerializeStructVariant for StructVariantBuilder {
    type Ok = Node;
    type Error = SerializeError;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        let variant = self.variant;
        self.object
            .push(key.to_owned(), value)
            .map_err(|error| error.nested_under(variant))
    }

    fn end(self) -> Result<Node, SerializeError> {
        let variant = self.variant;
        let inner = self
            .object
            .finish()
            .map_err(|error| error.nested_under(variant))?;
        Ok(object_node(vec![(variant.to_owned(), inner)])?)
    }
}

/// Serializes a map key to its string: strings, chars, integers and unit variants only.
pub(super) struct KeySerializer;

pub(super) const KEY_DETAIL: &str = "an object key must be a string or an integer";

impl ser::Serializer for KeySerializer {
    type Ok = String;
    type Error = SerializeError;
    type SerializeSeq = ser::Impossible<String, SerializeError>;
    type SerializeTuple = ser::Impossible<String, SerializeError>;
    type SerializeTupleStruct = ser::Impossible<String, SerializeError>;
    type SerializeTupleVariant = ser::Impossible<String, SerializeError>;
    type SerializeMap = ser::Impossible<String, SerializeError>;
    type SerializeStruct = ser::Impossible<String, SerializeError>;
    type SerializeStructVariant = ser::Impossible<String, SerializeError>;

    fn serialize_bool(self, _value: bool) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_i8(self, value: i8) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_i16(self, value: i16) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_i32(self, value: i32) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_i64(self, value: i64) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_i128(self, value: i128) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_u8(self, value: u8) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_u16(self, value: u16) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_u32(self, value: u32) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_u64(self, value: u64) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_u128(self, value: u128) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_f32(self, _value: f32) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_f64(self, _value: f64) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_char(self, value: char) -> Result<String, SerializeError> {
        Ok(value.to_string())
    }

    fn serialize_str(self, value: &str) -> Result<String, SerializeError> {
        Ok(value.to_owned())
    }

    fn serialize_bytes(self, _value: &[u8]) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_none(self) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_unit(self) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<String, SerializeError> {
        Ok(variant.to_owned())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<String, SerializeError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_seq(self, _length: Option<usize>) -> Result<Self::SerializeSeq, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_tuple(self, _length: usize) -> Result<Self::SerializeTuple, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _length: usize,
    ) -> Result<Self::SerializeTupleStruct, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _length: usize,
    ) -> Result<Self::SerializeTupleVariant, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_map(self, _length: Option<usize>) -> Result<Self::SerializeMap, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _length: usize,
    ) -> Result<Self::SerializeStruct, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _length: usize,
    ) -> Result<Self::SerializeStructVariant, SerializeError> {
        Err(unsupported(KEY_DETAIL))
    }
}
