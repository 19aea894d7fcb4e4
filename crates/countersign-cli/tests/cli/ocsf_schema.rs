//! A validator of OCSF events against the OCSF 1.8.0 source schema vendored in
//! `tests/ocsf-1.8.0/` (see its README for the source), and the tests that prove it can fail.
//!
//! It reads the schema the way the OCSF schema server builds it: a class or object starts from
//! what it `extends`, then the profiles its `attributes.$include` names (each attribute marked
//! with its profile unless it says otherwise), then its own attributes, each merged key by key
//! over what came before (an `enum` is merged value by value, so a class adds activities to
//! the base event's `0` and `99`); `"profile": null` makes an attribute part of the class
//! whatever the profiles. An event is then checked for:
//!
//! - no attribute outside its class or object (anything goes inside `unmapped`, type `object`);
//!   no attribute of a profile that `metadata.profiles` does not list; no deprecated attribute;
//! - every `required` attribute present (a profile's only when the profile is listed);
//! - types per `dictionary.json`: `string_t`, `integer_t` (32-bit), `long_t`, `float_t`,
//!   `boolean_t`, `json_t`, the derived types (their `regex`, `max_len` and `range`), object
//!   types recursively, and `is_array`;
//! - enum `_id` values among the merged enum, and a sibling string (`activity_name`) equal to
//!   the enum caption unless the value is 99 (Other);
//! - an object's `constraints` (`at_least_one`, `just_one`), inherited when it sets none;
//! - `class_uid` = category uid × 1000 + class uid, `category_uid` the class's category, and
//!   `type_uid` = `class_uid` × 100 + `activity_id`.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde_json::{Map, Value, json};

/// An attribute's merged definition (the keys of a class or object file's attribute entry).
type AttributeDefinition = Map<String, Value>;

/// A class or object with everything it inherits and includes.
struct Definition {
    name: String,
    attributes: BTreeMap<String, AttributeDefinition>,
    constraints: Map<String, Value>,
}

/// The vendored schema, loaded lazily.
pub struct Schema {
    root: PathBuf,
    dictionary: Map<String, Value>,
    types: Map<String, Value>,
    categories: Map<String, Value>,
    objects: RefCell<HashMap<String, Rc<Definition>>>,
}

impl Schema {
    /// The OCSF 1.8.0 schema in `tests/ocsf-1.8.0/`.
    pub fn ocsf_1_8_0() -> Schema {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ocsf-1.8.0");
        let version = read_json(&root.join("version.json"));
        assert_eq!(version["version"], "1.8.0", "the vendored schema's version");
        let dictionary = read_json(&root.join("dictionary.json"));
        Schema {
            dictionary: dictionary["attributes"]
                .as_object()
                .expect("dictionary attributes")
                .clone(),
            types: dictionary["types"]["attributes"]
                .as_object()
                .expect("dictionary types")
                .clone(),
            categories: read_json(&root.join("categories.json"))["attributes"]
                .as_object()
                .expect("categories")
                .clone(),
            root,
            objects: RefCell::new(HashMap::new()),
        }
    }

    /// Every way `event` breaks the schema, each as `path: problem`; empty when it is valid.
    pub fn validate(&self, event: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        let Some(fields) = event.as_object() else {
            return vec!["the event is not a JSON object".to_owned()];
        };
        // Only API Activity is vendored: its class file sets the uid and the category.
        let class_file = read_json(&self.root.join("events/application/api_activity.json"));
        let class = self.resolve(&class_file, Kind::Class);
        let category =
            read_json(&self.root.join("events/application/application.json"))["category"]
                .as_str()
                .expect("the class's category")
                .to_owned();
        let category_uid = self.categories[&category]["uid"]
            .as_i64()
            .expect("a category uid");
        let class_uid = category_uid * 1000 + class_file["uid"].as_i64().expect("a class uid");
        if fields.get("class_uid").and_then(Value::as_i64) != Some(class_uid) {
            errors.push(format!(
                "class_uid: {} is not {class_uid}, the only class vendored ({})",
                show(fields.get("class_uid")),
                class.name
            ));
            return errors;
        }
        if fields.get("category_uid").and_then(Value::as_i64) != Some(category_uid) {
            errors.push(format!(
                "category_uid: {} is not {category_uid}, the category of class {class_uid}",
                show(fields.get("category_uid"))
            ));
        }
        if let Some(activity) = fields.get("activity_id").and_then(Value::as_i64)
            && fields.get("type_uid").and_then(Value::as_i64) != Some(class_uid * 100 + activity)
        {
            errors.push(format!(
                "type_uid: {} is not class_uid × 100 + activity_id = {}",
                show(fields.get("type_uid")),
                class_uid * 100 + activity
            ));
        }
        let mut profiles = BTreeSet::new();
        if let Some(listed) = event["metadata"]["profiles"].as_array() {
            for profile in listed.iter().filter_map(Value::as_str) {
                if !self.root.join(format!("profiles/{profile}.json")).is_file() {
                    errors.push(format!(
                        "metadata.profiles: `{profile}` is not a profile of this schema"
                    ));
                }
                profiles.insert(profile.to_owned());
            }
        }
        self.check_object("", &class, fields, &profiles, &mut errors);
        errors
    }

    /// Check `fields` against `definition`; `path` is the dotted path of the object.
    fn check_object(
        &self,
        path: &str,
        definition: &Definition,
        fields: &Map<String, Value>,
        profiles: &BTreeSet<String>,
        errors: &mut Vec<String>,
    ) {
        let at = |name: &str| {
            if path.is_empty() {
                name.to_owned()
            } else {
                format!("{path}.{name}")
            }
        };
        for (name, value) in fields {
            let Some(attribute) = definition.attributes.get(name) else {
                errors.push(format!(
                    "{}: not an attribute of `{}`",
                    at(name),
                    definition.name
                ));
                continue;
            };
            if let Some(profile) = attribute.get("profile").and_then(Value::as_str)
                && !profiles.contains(profile)
            {
                errors.push(format!(
                    "{}: belongs to the `{profile}` profile, which metadata.profiles does not list",
                    at(name)
                ));
            }
            let Some(entry) = self.dictionary.get(name) else {
                errors.push(format!("{}: not in the dictionary", at(name)));
                continue;
            };
            if attribute.contains_key("@deprecated") || entry.get("@deprecated").is_some() {
                errors.push(format!("{}: deprecated in OCSF 1.8.0", at(name)));
            }
            let type_name = attribute
                .get("type")
                .or_else(|| entry.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("(none)");
            let is_array = attribute
                .get("is_array")
                .or_else(|| entry.get("is_array"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if is_array {
                match value.as_array() {
                    Some(items) => {
                        for (index, item) in items.iter().enumerate() {
                            let item_path = format!("{}[{index}]", at(name));
                            self.check_value(&item_path, type_name, item, profiles, errors);
                        }
                    }
                    None => errors.push(format!(
                        "{}: expected an array of {type_name}, found {}",
                        at(name),
                        kind_of(value)
                    )),
                }
            } else {
                self.check_value(&at(name), type_name, value, profiles, errors);
            }
            self.check_enum(&at(name), name, entry, attribute, value, fields, errors);
        }
        for (name, attribute) in &definition.attributes {
            let active = attribute
                .get("profile")
                .and_then(Value::as_str)
                .is_none_or(|profile| profiles.contains(profile));
            if active
                && attribute.get("requirement").and_then(Value::as_str) == Some("required")
                && !fields.contains_key(name)
            {
                errors.push(format!(
                    "{}: required by `{}` but missing",
                    at(name),
                    definition.name
                ));
            }
        }
        for (constraint, names) in &definition.constraints {
            let names: Vec<&str> = names
                .as_array()
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let present = names
                .iter()
                .filter(|name| fields.contains_key(**name))
                .count();
            let holds = match constraint.as_str() {
                "at_least_one" => present >= 1,
                "just_one" => present == 1,
                _ => true,
            };
            if !holds {
                let place = if path.is_empty() { "(event)" } else { path };
                errors.push(format!(
                    "{place}: `{}` needs {constraint} of {}",
                    definition.name,
                    names.join(", ")
                ));
            }
        }
    }

    /// Check one value (not an array) against `type_name`.
    fn check_value(
        &self,
        path: &str,
        type_name: &str,
        value: &Value,
        profiles: &BTreeSet<String>,
        errors: &mut Vec<String>,
    ) {
        if type_name == "object" {
            if !value.is_object() {
                errors.push(format!(
                    "{path}: expected an object, found {}",
                    kind_of(value)
                ));
            }
            return;
        }
        if !type_name.ends_with("_t") {
            let Some(definition) = self.object(type_name) else {
                errors.push(format!(
                    "{path}: object type `{type_name}` is not vendored in tests/ocsf-1.8.0"
                ));
                return;
            };
            match value.as_object() {
                Some(fields) => self.check_object(path, &definition, fields, profiles, errors),
                None => errors.push(format!(
                    "{path}: expected a `{type_name}` object, found {}",
                    kind_of(value)
                )),
            }
            return;
        }
        // A derived type adds rules to its base type (`timestamp_t` is a `long_t`).
        let mut base = type_name;
        let mut rules = Vec::new();
        while let Some(definition) = self.types.get(base) {
            rules.push(definition);
            match definition.get("type").and_then(Value::as_str) {
                Some(parent) => base = parent,
                None => break,
            }
        }
        if rules.is_empty() {
            errors.push(format!("{path}: unknown type `{type_name}`"));
            return;
        }
        let fits = match base {
            "string_t" => value.is_string(),
            "integer_t" => value
                .as_i64()
                .is_some_and(|number| i32::try_from(number).is_ok()),
            "long_t" => value.as_i64().is_some(),
            "float_t" => value.is_number(),
            "boolean_t" => value.is_boolean(),
            "json_t" => true,
            _ => false,
        };
        if !fits {
            let described = if base == type_name {
                type_name.to_owned()
            } else {
                format!("{type_name} ({base})")
            };
            errors.push(format!(
                "{path}: expected {described}, found {}",
                show(Some(value))
            ));
            return;
        }
        for rule in rules {
            if let (Some(pattern), Some(text)) =
                (rule.get("regex").and_then(Value::as_str), value.as_str())
            {
                let regex = regex::Regex::new(pattern).expect("the schema's regex compiles");
                if !regex.is_match(text) {
                    errors.push(format!("{path}: `{text}` is not a valid {type_name}"));
                }
            }
            if let (Some(max), Some(text)) =
                (rule.get("max_len").and_then(Value::as_u64), value.as_str())
                && text.len() as u64 > max
            {
                errors.push(format!("{path}: longer than {max} characters"));
            }
            if let (Some(range), Some(number)) =
                (rule.get("range").and_then(Value::as_array), value.as_i64())
                && (range[0].as_i64().is_some_and(|low| number < low)
                    || range[1].as_i64().is_some_and(|high| number > high))
            {
                errors.push(format!("{path}: {number} is outside {range:?}"));
            }
        }
    }

    /// Check an enum attribute's value, and its sibling string (`activity_id` names
    /// `activity_name`).
    #[allow(clippy::too_many_arguments)]
    fn check_enum(
        &self,
        path: &str,
        name: &str,
        entry: &Value,
        attribute: &AttributeDefinition,
        value: &Value,
        fields: &Map<String, Value>,
        errors: &mut Vec<String>,
    ) {
        // The base event's `class_uid` and `category_uid` enums hold only 0; the schema server
        // puts the class's own values there, which `validate` checks against the class file.
        if matches!(name, "class_uid" | "category_uid") {
            return;
        }
        let mut values = Map::new();
        for source in [entry.get("enum"), attribute.get("enum")]
            .into_iter()
            .flatten()
        {
            if let Some(source) = source.as_object() {
                values.extend(source.clone());
            }
        }
        if values.is_empty() {
            return;
        }
        let key = match value {
            Value::Number(number) => number.to_string(),
            Value::String(text) => text.clone(),
            _ => return,
        };
        let Some(member) = values.get(&key) else {
            let known: Vec<&String> = values.keys().collect();
            errors.push(format!(
                "{path}: {key} is not one of the enum values {known:?} of `{name}`"
            ));
            return;
        };
        if let Some(sibling) = entry.get("sibling").and_then(Value::as_str)
            && key != "99"
            && let (Some(given), Some(caption)) = (
                fields.get(sibling).and_then(Value::as_str),
                member.get("caption").and_then(Value::as_str),
            )
            && given != caption
        {
            errors.push(format!(
                "{sibling}: `{given}` is not `{caption}`, the caption of {name} {key}"
            ));
        }
    }

    /// The object `name`, resolved, or `None` when it is not vendored.
    fn object(&self, name: &str) -> Option<Rc<Definition>> {
        if let Some(found) = self.objects.borrow().get(name) {
            return Some(Rc::clone(found));
        }
        let file = self.root.join(format!("objects/{name}.json"));
        if !file.is_file() {
            return None;
        }
        let definition = Rc::new(self.resolve(&read_json(&file), Kind::Object));
        self.objects
            .borrow_mut()
            .insert(name.to_owned(), Rc::clone(&definition));
        Some(definition)
    }

    /// A class or object file with what it extends and includes.
    fn resolve(&self, file: &Value, kind: Kind) -> Definition {
        let name = file["name"].as_str().expect("a name").to_owned();
        let (mut attributes, mut constraints) = match file.get("extends").and_then(Value::as_str) {
            Some(parent) => {
                let parent = match kind {
                    Kind::Object => self.object(parent).expect("a vendored parent object"),
                    Kind::Class => Rc::new(self.resolve(&self.class_file(parent), Kind::Class)),
                };
                (parent.attributes.clone(), parent.constraints.clone())
            }
            None => (BTreeMap::new(), Map::new()),
        };
        let own = file["attributes"].as_object().cloned().unwrap_or_default();
        for include in own
            .get("$include")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let path = include.as_str().expect("an include path");
            let profile = read_json(&self.root.join(path));
            let profile_name = profile["name"].as_str().expect("a profile name");
            for (attribute, definition) in profile["attributes"].as_object().into_iter().flatten() {
                let mut definition = definition.as_object().cloned().unwrap_or_default();
                definition
                    .entry("profile")
                    .or_insert_with(|| json!(profile_name));
                merge(
                    attributes.entry(attribute.clone()).or_default(),
                    &definition,
                );
            }
        }
        for (attribute, definition) in own.iter().filter(|(key, _)| *key != "$include") {
            let definition = definition.as_object().cloned().unwrap_or_default();
            merge(
                attributes.entry(attribute.clone()).or_default(),
                &definition,
            );
        }
        if let Some(own_constraints) = file.get("constraints").and_then(Value::as_object) {
            constraints = own_constraints.clone();
        }
        Definition {
            name,
            attributes,
            constraints,
        }
    }

    /// The class file named `name`, anywhere under `events/`.
    fn class_file(&self, name: &str) -> Value {
        for path in [
            format!("events/{name}.json"),
            format!("events/{name}/{name}.json"),
        ] {
            let file = self.root.join(path);
            if file.is_file() {
                return read_json(&file);
            }
        }
        panic!("class `{name}` is not vendored");
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Class,
    Object,
}

/// Merge `over` into `base` key by key; enums value by value.
fn merge(base: &mut AttributeDefinition, over: &AttributeDefinition) {
    for (key, value) in over {
        match (key.as_str(), base.get_mut(key), value) {
            ("enum", Some(Value::Object(existing)), Value::Object(added)) => {
                existing.extend(added.clone());
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("read {}: {error}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("parse {}: {error}", path.display()))
}

fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "(missing)".to_owned(), ToString::to_string)
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The smallest valid API Activity event: what each failing case below changes one thing of.
fn minimal_event() -> Value {
    json!({
        "activity_id": 99,
        "activity_name": "Attempt",
        "category_uid": 6,
        "class_uid": 6003,
        "type_uid": 600399,
        "time": 1_764_000_000_000_i64,
        "severity_id": 1,
        "metadata": {"version": "1.8.0", "product": {"name": "Countersign"}},
        "actor": {"user": {"name": "agent:support-bot"}},
        "api": {"operation": "stripe.refund", "request": {"uid": "att_x"}},
        "src_endpoint": {"svc_name": "countersign"},
    })
}

/// `event` with the value at the `/`-separated `pointer` set to `value` (`None` removes it).
fn changed(pointer: &str, value: Option<Value>) -> Value {
    let mut event = minimal_event();
    let (parent, last) = pointer.rsplit_once('/').expect("a pointer with a slash");
    let target = event
        .pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .expect("the parent object");
    match value {
        Some(value) => target.insert(last.to_owned(), value),
        None => target.remove(last),
    };
    event
}

fn assert_reported(event: &Value, expected: &str) {
    let errors = Schema::ocsf_1_8_0().validate(event);
    assert!(
        errors.iter().any(|error| error.contains(expected)),
        "expected an error containing `{expected}`, got {errors:#?}"
    );
}

#[test]
fn accepts_the_smallest_valid_event() {
    let errors = Schema::ocsf_1_8_0().validate(&minimal_event());
    assert_eq!(errors, Vec::<String>::new());
}

#[test]
fn reports_a_missing_required_attribute() {
    assert_reported(
        &changed("/src_endpoint", None),
        "src_endpoint: required by `api_activity` but missing",
    );
    assert_reported(
        &changed("/api/request/uid", None),
        "api.request.uid: required by `request` but missing",
    );
    assert_reported(
        &changed("/metadata/version", None),
        "metadata.version: required by `metadata` but missing",
    );
}

#[test]
fn reports_an_attribute_outside_the_class_or_object() {
    assert_reported(
        &changed("/receipt_seq", Some(json!(3))),
        "receipt_seq: not an attribute of `api_activity`",
    );
    assert_reported(
        &changed("/actor/user/approver", Some(json!("human:alice"))),
        "actor.user.approver: not an attribute of `user`",
    );
    // Inside `unmapped`, anything goes.
    let errors = Schema::ocsf_1_8_0().validate(&changed(
        "/unmapped",
        Some(json!({"receipt_seq": 3, "anything": {"at": ["all"]}})),
    ));
    assert_eq!(errors, Vec::<String>::new());
}

#[test]
fn reports_a_wrong_type() {
    assert_reported(
        &changed("/time", Some(json!("2026-12-02T05:00:00Z"))),
        "time: expected timestamp_t (long_t)",
    );
    assert_reported(
        &changed("/metadata/sequence", Some(json!(5_000_000_000_i64))),
        "metadata.sequence: expected integer_t, found 5000000000",
    );
    assert_reported(
        &changed("/api/operation", Some(json!(7))),
        "api.operation: expected string_t",
    );
    assert_reported(
        &changed("/actor/user", Some(json!("agent:support-bot"))),
        "actor.user: expected a `user` object, found a string",
    );
    assert_reported(
        &changed("/metadata/labels", Some(json!("environment:test"))),
        "metadata.labels: expected an array of string_t",
    );
    assert_reported(
        &changed("/src_endpoint/port", Some(json!(70_000))),
        "src_endpoint.port: 70000 is outside",
    );
    assert_reported(
        &changed("/src_endpoint/ip", Some(json!("not an address"))),
        "is not a valid ip_t",
    );
}

#[test]
fn reports_an_enum_value_the_class_does_not_define() {
    // 5 is no API Activity activity (1 to 4, 0 and 99 are).
    let mut event = changed("/activity_id", Some(json!(5)));
    event["type_uid"] = json!(600305);
    assert_reported(&event, "activity_id: 5 is not one of the enum values");
    assert_reported(
        &changed("/severity_id", Some(json!(7))),
        "severity_id: 7 is not one of the enum values",
    );
    assert_reported(
        &changed("/activity_id", Some(json!(1))),
        "activity_name: `Attempt` is not `Create`",
    );
}

#[test]
fn reports_inconsistent_class_category_and_type_uids() {
    assert_reported(
        &changed("/type_uid", Some(json!(600301))),
        "type_uid: 600301 is not class_uid × 100 + activity_id = 600399",
    );
    assert_reported(
        &changed("/category_uid", Some(json!(3))),
        "category_uid: 3 is not 6",
    );
    assert_reported(
        &changed("/class_uid", Some(json!(3002))),
        "class_uid: 3002 is not 6003",
    );
}

#[test]
fn reports_a_profile_attribute_without_its_profile_and_a_missing_constraint() {
    assert_reported(
        &changed("/disposition_id", Some(json!(1))),
        "disposition_id: belongs to the `security_control` profile",
    );
    let mut event = changed("/disposition_id", Some(json!(1)));
    event["metadata"]["profiles"] = json!(["security_control"]);
    assert_eq!(Schema::ocsf_1_8_0().validate(&event), Vec::<String>::new());
    // A listed profile's required attributes become required (`cloud` needs `cloud`).
    event["metadata"]["profiles"] = json!(["security_control", "cloud"]);
    assert_reported(&event, "cloud: required by `api_activity` but missing");
    // `actor` needs at least one of its identities.
    assert_reported(
        &changed("/actor", Some(json!({}))),
        "actor: `actor` needs at_least_one of",
    );
}
