//! The edit helpers the write routes call: each refuses with the contract's error and names the
//! key or target concerned.

use hf_model::files::FieldFile;
use hf_model::{
    files, new_problems, Action, Error, Field, FieldKind, KeyKind, Model, Module, Object,
    QualifiedName, ScalarType, Screen, Target,
};

fn demo() -> Model {
    files::load_dir(&super::fixtures_dir().join("demo")).unwrap()
}

fn name(object: &str) -> QualifiedName {
    QualifiedName::new("crm", object)
}

fn text_field(key: &str) -> Field {
    let kind = FieldKind::Scalar {
        field_type: ScalarType::Text,
        required: false,
        unique: false,
        indexed: false,
        values: Vec::new(),
        default_value: None,
    };
    Field::new(key, "Label", kind)
}

fn in_use(error: Error) -> (Target, Target) {
    match error {
        Error::InUse { target, referrer } => (*target, *referrer),
        other => panic!("expected InUse, got {other:?}"),
    }
}

#[test]
fn modules() {
    let mut model = demo();
    let change = model.create_module(Module::new("erp", "ERP")).unwrap();
    assert_eq!(change.action, Action::Created);
    assert_eq!(change.file(), "erp/module.json5");
    assert_eq!(change.describe(), "create module erp");
    assert!(matches!(
        model.create_module(Module::new("crm", "Again")),
        Err(Error::AlreadyExists { target: Target::Module { module } }) if module == "crm"
    ));
    assert!(matches!(
        model.create_module(Module::new("pg_x", "Reserved")),
        Err(Error::InvalidKey {
            kind: KeyKind::Module,
            ..
        })
    ));
    assert!(matches!(
        model.replace_module(Module::new("nothing", "x")),
        Err(Error::ModuleNotFound { module }) if module == "nothing"
    ));
    let change = model.replace_module(Module::new("crm", "Renamed")).unwrap();
    assert_eq!(change.action, Action::Updated);
    assert_eq!(model.module("crm").unwrap().label, "Renamed");
    assert_eq!(
        model.module("crm").unwrap().objects.len(),
        4,
        "objects are kept"
    );

    let (target, referrer) = in_use(model.delete_module("crm").unwrap_err());
    assert_eq!(target, Target::module("crm"));
    assert_eq!(referrer, Target::object(&name("account")));
    assert_eq!(model.delete_module("erp").unwrap().action, Action::Deleted);
    assert!(matches!(
        model.delete_module("erp"),
        Err(Error::ModuleNotFound { .. })
    ));
}

#[test]
fn objects() {
    let mut model = demo();
    assert!(matches!(
        model.create_object("nothing", Object::new("x", "X")),
        Err(Error::ModuleNotFound { module }) if module == "nothing"
    ));
    assert!(matches!(
        model.create_object("crm", Object::new("account", "Again")),
        Err(Error::AlreadyExists { .. })
    ));
    assert!(matches!(
        model.create_object("crm", Object::new("Bad", "X")),
        Err(Error::InvalidKey {
            kind: KeyKind::Object,
            ..
        })
    ));
    let change = model
        .create_object("crm", Object::new("lead", "Lead"))
        .unwrap();
    assert_eq!(change.file(), "crm/objects/lead.json5");

    let mut replacement = Object::new("opportunity", "Deal");
    replacement
        .fields
        .insert("ignored".into(), text_field("ignored"));
    model.replace_object("crm", replacement).unwrap();
    let opportunity = model.object(&name("opportunity")).unwrap();
    assert_eq!(opportunity.label, "Deal");
    assert!(opportunity.fields.contains_key("amount"), "fields are kept");
    assert!(!opportunity.fields.contains_key("ignored"));
    assert!(matches!(
        model.replace_object("crm", Object::new("nothing", "x")),
        Err(Error::ObjectNotFound { object }) if object == name("nothing")
    ));

    // Extended, lookup target, rollup source.
    let (_, referrer) = in_use(model.delete_object(&name("party")).unwrap_err());
    assert_eq!(referrer, Target::object(&name("account")));
    let (_, referrer) = in_use(model.delete_object(&name("account")).unwrap_err());
    assert_eq!(referrer, Target::field(&name("contact"), "account"));
    let (_, referrer) = in_use(model.delete_object(&name("opportunity")).unwrap_err());
    assert_eq!(
        referrer,
        Target::field(&name("account"), "opportunity_count")
    );

    // A lookup of the object to itself does not block its deletion.
    let mut tree = Object::new("tree", "Tree");
    let parent = FieldKind::Lookup {
        target: name("tree"),
        required: false,
        indexed: false,
    };
    tree.fields
        .insert("parent".into(), Field::new("parent", "Parent", parent));
    model.create_object("crm", tree).unwrap();
    assert_eq!(
        model.delete_object(&name("tree")).unwrap().action,
        Action::Deleted
    );
    assert!(matches!(
        model.delete_object(&name("tree")),
        Err(Error::ObjectNotFound { .. })
    ));
}

#[test]
fn fields() {
    let mut model = demo();
    assert!(matches!(
        model.create_field(&name("nothing"), text_field("x")),
        Err(Error::ObjectNotFound { object }) if object == name("nothing")
    ));
    assert!(matches!(
        model.create_field(&QualifiedName::new("erp", "x"), text_field("x")),
        Err(Error::ObjectNotFound { .. })
    ));
    assert!(matches!(
        model.create_field(&name("opportunity"), text_field("amount")),
        Err(Error::AlreadyExists { target }) if target == Target::field(&name("opportunity"), "amount")
    ));
    assert!(matches!(
        model.create_field(&name("opportunity"), text_field("id")),
        Err(Error::InvalidKey {
            kind: KeyKind::Field,
            ..
        })
    ));
    let change = model
        .create_field(&name("opportunity"), text_field("source"))
        .unwrap();
    assert_eq!(change.describe(), "create field crm.opportunity.source");
    assert_eq!(change.file(), "crm/objects/opportunity.json5");
    assert!(matches!(
        model.replace_field(&name("opportunity"), text_field("nothing")),
        Err(Error::FieldNotFound { field, .. }) if field == "nothing"
    ));
    model
        .replace_field(&name("opportunity"), text_field("source"))
        .unwrap();

    let (_, referrer) = in_use(
        model
            .delete_field(&name("opportunity"), "amount")
            .unwrap_err(),
    );
    assert_eq!(referrer, Target::field(&name("account"), "pipeline_amount"));
    let (_, referrer) = in_use(
        model
            .delete_field(&name("opportunity"), "probability")
            .unwrap_err(),
    );
    assert_eq!(
        referrer,
        Target::rule(&name("opportunity"), "probability_in_range")
    );
    // An inherited field is used through the subtype: party.name anchors party's own rule.
    let (_, referrer) = in_use(model.delete_field(&name("party"), "name").unwrap_err());
    assert_eq!(referrer, Target::rule(&name("party"), "name_not_blank"));
    assert_eq!(
        model
            .delete_field(&name("opportunity"), "close_date")
            .unwrap()
            .action,
        Action::Deleted
    );
}

#[test]
fn screens() {
    let mut model = demo();
    assert!(matches!(
        model.create_screen("nothing", Screen::new("x", "<p/>")),
        Err(Error::ModuleNotFound { .. })
    ));
    assert!(matches!(
        model.create_screen("crm", Screen::new("counter", "<p/>")),
        Err(Error::AlreadyExists { .. })
    ));
    let change = model
        .create_screen("crm", Screen::new("home", "<p/>"))
        .unwrap();
    assert_eq!(change.file(), "crm/screens/home.json5");
    assert!(matches!(
        model.replace_screen("crm", Screen::new("nothing", "<p/>")),
        Err(Error::ScreenNotFound { .. })
    ));
    model
        .replace_screen("crm", Screen::new("home", "<b/>"))
        .unwrap();
    assert_eq!(
        model.delete_screen("crm", "home").unwrap().action,
        Action::Deleted
    );
    assert!(matches!(
        model.delete_screen("crm", "home"),
        Err(Error::ScreenNotFound { .. })
    ));
}

#[test]
fn new_problems_are_what_an_edit_adds() {
    let base = demo();
    let mut broken = base.clone();
    let mut orphan = Object::new("orphan", "Orphan");
    orphan.extends = Some(name("nothing"));
    broken.create_object("crm", orphan).unwrap();
    let added = new_problems(&base, &broken);
    assert_eq!(added.len(), 1);
    assert!(added[0].code.is_missing_reference());
    assert_eq!(added[0].target, Target::object(&name("orphan")));
    assert_eq!(added[0].property, Some("extends"));

    // On an already broken model, an unrelated edit adds nothing.
    let mut next = broken.clone();
    next.create_field(&name("opportunity"), text_field("source"))
        .unwrap();
    assert_eq!(new_problems(&broken, &next), vec![]);
}

fn flat(kind: &str) -> FieldFile {
    FieldFile {
        label: "Label".into(),
        field_kind: kind.into(),
        ..FieldFile::default()
    }
}

#[test]
fn flat_field_bodies_convert_to_variants() {
    let mut scalar = flat("scalar");
    scalar.field_type = Some("decimal".into());
    scalar.formula = Some("1 + 1".into());
    assert!(matches!(
        scalar.clone().into_field("x"),
        Err(Error::PropertyNotAllowed {
            property: "formula",
            kind: "scalar"
        })
    ));
    scalar.formula = None;
    scalar.required = Some(true);
    let field = scalar.into_field("x").unwrap();
    assert!(matches!(
        field.kind,
        FieldKind::Scalar {
            field_type: ScalarType::Decimal,
            required: true,
            ..
        }
    ));

    assert!(matches!(
        flat("blob").into_field("x"),
        Err(Error::UnknownValue {
            property: "fieldKind",
            ..
        })
    ));
    assert!(matches!(
        flat("scalar").into_field("x"),
        Err(Error::MissingProperty {
            property: "fieldType"
        })
    ));

    // A formula may carry the false booleans every field shows when read, not true ones.
    let mut formula = flat("formula");
    formula.formula = Some("amount * 2".into());
    formula.field_type = Some("decimal".into());
    formula.required = Some(false);
    formula.unique_constraint = Some(false);
    formula.indexed = Some(false);
    assert!(formula.clone().into_field("x").is_ok());
    formula.indexed = Some(true);
    assert!(matches!(
        formula.into_field("x"),
        Err(Error::PropertyNotAllowed {
            property: "indexed",
            kind: "formula"
        })
    ));

    let mut lookup = flat("lookup");
    lookup.lookup_target = Some("crm".into());
    assert!(matches!(
        lookup.clone().into_field("x"),
        Err(Error::InvalidName { .. })
    ));
    lookup.lookup_target = Some("crm.account".into());
    let field = lookup.into_field("x").unwrap();
    assert_eq!(
        FieldFile::from_field(&field).lookup_target.as_deref(),
        Some("crm.account")
    );

    let mut rollup = flat("rollup");
    rollup.rollup_function = Some("median".into());
    rollup.source = Some("crm.opportunity.account".into());
    rollup.field_type = Some("decimal".into());
    assert!(matches!(
        rollup.clone().into_field("x"),
        Err(Error::UnknownValue {
            property: "rollupFunction",
            ..
        })
    ));
    rollup.rollup_function = Some("avg".into());
    rollup.field = Some("amount".into());
    let field = rollup.into_field("x").unwrap();
    assert_eq!(field.value_type(), ScalarType::Decimal);
    assert!(!field.is_stored());
}
