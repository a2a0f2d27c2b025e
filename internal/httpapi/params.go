package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/pb33f/libopenapi"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/parameters"
)

// paramChecks are the document's checks of a request's path, query and
// header parameters: the document, not a second copy of its rules in
// code, says what a valid id, status or limit is. The body of a submit is
// checked by jobspec instead, as the CLI checks it.
type paramChecks []func(*http.Request) (bool, []*verrors.ValidationError)

// newParamChecks builds the checks from the served document.
func newParamChecks() (paramChecks, error) {
	doc, err := libopenapi.NewDocument(document)
	if err != nil {
		return nil, fmt.Errorf("httpapi: the OpenAPI document: %w", err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("httpapi: the OpenAPI document: %w", err)
	}
	v := parameters.NewParameterValidator(&model.Model)
	return paramChecks{v.ValidatePathParams, v.ValidateQueryParams, v.ValidateHeaderParams}, nil
}

// check returns the first broken rule of r's parameters, or "".
func (c paramChecks) check(r *http.Request) string {
	for _, f := range c {
		if ok, errs := f(r); !ok && len(errs) > 0 {
			e := errs[0]
			msg := e.Message
			if e.Reason != "" && !strings.Contains(msg, e.Reason) {
				msg += ": " + e.Reason
			}
			return msg
		}
	}
	return ""
}
