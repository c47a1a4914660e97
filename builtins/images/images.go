// Package images provides the container image builtins: image_save pulls an
// image into a tarball on the control machine, controller_image builds the
// kubexm controller's image from this binary, image_push and
// registry_check reach a registry.
package images

import "github.com/mensylisir/kubexm/engine/step"

// Builtins returns the image builtins.
func Builtins() []step.Builtin {
	return []step.Builtin{newImageSave(), newControllerImage(), imagePushBuiltin{}, registryCheckBuiltin{}}
}
