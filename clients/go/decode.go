package once

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// The nodes write an integer above 2^63-1 as a decimal string
// (src/common/json_value.c, as oncectl does): these decoders take both
// spellings for the unsigned fields, so no value a node can send is
// refused.

// UnmarshalJSON decodes an answer, unsigned fields as numbers or strings.
func (a *Answer) UnmarshalJSON(b []byte) error {
	type plain Answer
	return decodeLenient(b, (*plain)(a))
}

// UnmarshalJSON decodes an attempt, unsigned fields as numbers or strings.
func (a *Attempt) UnmarshalJSON(b []byte) error {
	type plain Attempt
	return decodeLenient(b, (*plain)(a))
}

// UnmarshalJSON decodes a status, unsigned fields as numbers or strings.
func (s *StatusAnswer) UnmarshalJSON(b []byte) error {
	type plain StatusAnswer
	return decodeLenient(b, (*plain)(s))
}

func decodeLenient(b []byte, v interface{}) error {
	err := json.Unmarshal(b, v)
	var te *json.UnmarshalTypeError
	if err == nil || !errors.As(err, &te) || te.Value != "string" {
		return err
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return err
	}
	uints := uintFields(reflect.TypeOf(v).Elem())
	for k, raw := range m {
		var s string
		if !uints[k] || len(raw) < 3 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			continue
		}
		if strings.Trim(s, "0123456789") == "" {
			m[k] = json.RawMessage(s)
		}
	}
	nb, merr := json.Marshal(m)
	if merr != nil {
		return err
	}
	rv := reflect.ValueOf(v).Elem()
	rv.Set(reflect.Zero(rv.Type()))
	return json.Unmarshal(nb, v)
}

// uintFields: the json names of a struct's unsigned integer fields.
func uintFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		switch f.Type.Kind() {
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out[strings.Split(f.Tag.Get("json"), ",")[0]] = true
		}
	}
	return out
}
